"""The candidate worker's seccomp layer (right before candidate code is imported).

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os

from harness.cpu import compile_cpp
from harness.sandbox import ESCAPE_SYSCALLS, MEMORY_SYSCALLS, SandboxSetupError

# Each trapped syscall reports under the anti-cheat check it belongs to.
TRAPPED = {
    "process_spawn": ("fork", "vfork", "execve", "execveat"),
    "network_access": ("socket", "socketpair"),
    "memory_access": MEMORY_SYSCALLS,
    "sandbox_escape": (*ESCAPE_SYSCALLS, "personality"),
    # reported only for a path outside the worker's scratch folder that exists (the reporter judges: below)
    "file_access": ("unlink", "rmdir", "rename", "renameat", "unlinkat", "renameat2"),
}
CLONE_THREAD = 0x00010000
SIGSYS = 31

# The report channel: one little-endian int32 syscall number per trapped call. The reporter checks, before each
# report, that its descriptor is still the pipe it was given (same device and inode): a candidate that closed it,
# or put another file in its place, would otherwise make trapped calls go unreported. A broken channel ends the
# worker the way the filter ends a handler change (SIGSYS; the parent reports cheat_detected:sandbox_escape).
# Deletions and renames are trapped too, and judged here: one whose path (its folder resolved by the kernel:
# symbolic links, `..`, a directory descriptor) lies outside the scratch folder and exists is reported and
# refused with EACCES (what Landlock answers); any other is made again with `magic` in an argument the call does
# not use, which the filter lets through. So a native deletion outside scratch is named, not only blocked.
_SIGSYS_SOURCE = r"""
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
static int report_fd = -1;
static dev_t report_dev = 0;
static ino_t report_ino = 0;
static char scratch[4096];
static size_t scratch_len = 0;
static uint64_t magic = 0;
static void channel_broken(void) {
    // rt_sigaction(SIGSYS) is what the filter answers with SIGSYS for the whole process
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    syscall(SYS_rt_sigaction, SIGSYS, &sa, nullptr, 8);
    _exit(159);  // not reached
}
static void report(int32_t nr) {
    struct stat st;
    if (report_fd < 0 || fstat(report_fd, &st) != 0 || st.st_dev != report_dev || st.st_ino != report_ino ||
        write(report_fd, &nr, sizeof nr) != static_cast<ssize_t>(sizeof nr)) {
        channel_broken();
    }
}
// 1: `path` (relative to `dirfd`) names an existing entry outside scratch, or a new one in a folder outside it.
static int outside(long dirfd, const char* path) {
    if (path == nullptr || scratch_len == 0) return 0;
    size_t n = strnlen(path, 4096);
    if (n == 0 || n >= 4096) return 0;
    char dir[4096], last[256], real[4096], link[32] = "/proc/self/fd/";
    memcpy(dir, path, n + 1);
    while (n > 1 && dir[n - 1] == '/') dir[--n] = 0;
    char* slash = strrchr(dir, '/');
    const char* name = slash ? slash + 1 : dir;
    size_t m = strlen(name);
    if (m == 0 || m >= sizeof last || !strcmp(name, ".") || !strcmp(name, "..")) return 0;
    memcpy(last, name, m + 1);
    if (!slash) strcpy(dir, ".");
    else if (slash == dir) strcpy(dir, "/");
    else *slash = 0;
    int fd = static_cast<int>(syscall(SYS_openat, static_cast<int>(dirfd), dir, O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (fd < 0) return 0;  // no such folder: the call fails on its own
    size_t k = 14;
    char digits[12];
    int d = 0;
    for (int v = fd; v > 0 || d == 0; v /= 10) digits[d++] = static_cast<char>('0' + v % 10);
    while (d > 0) link[k++] = digits[--d];
    link[k] = 0;
    ssize_t r = readlink(link, real, sizeof real - 1);
    struct stat st;
    int exists = fstatat(fd, last, &st, AT_SYMLINK_NOFOLLOW) == 0;
    close(fd);
    if (r <= 0) return 0;
    real[r] = 0;
    size_t len = static_cast<size_t>(r);
    int inside = (len == scratch_len || (len > scratch_len && real[scratch_len] == '/')) &&
                 !strncmp(real, scratch, scratch_len);
    return inside ? 0 : exists ? 1 : 2;
}
static long judged(long nr, const long* a) {
    const long here = AT_FDCWD;
    int o = 0;
    long again = -ENOSYS;
#ifdef SYS_unlink
    if (nr == SYS_unlink) { o = outside(here, (const char*)a[0]) == 1; if (!o) again = syscall(SYS_unlinkat, here, a[0], 0, magic); }
#endif
#ifdef SYS_rmdir
    if (nr == SYS_rmdir) { o = outside(here, (const char*)a[0]) == 1; if (!o) again = syscall(SYS_unlinkat, here, a[0], AT_REMOVEDIR, magic); }
#endif
    if (nr == SYS_unlinkat) { o = outside(a[0], (const char*)a[1]) == 1; if (!o) again = syscall(SYS_unlinkat, a[0], a[1], a[2], magic); }
    long from_dir = a[0], from = a[1], to_dir = a[2], to = a[3], flags = nr == SYS_renameat2 ? a[4] : 0;
#ifdef SYS_rename
    if (nr == SYS_rename) { from_dir = here; from = a[0]; to_dir = here; to = a[1]; }
    if (nr == SYS_rename || nr == SYS_renameat || nr == SYS_renameat2) {
#else
    if (nr == SYS_renameat || nr == SYS_renameat2) {
#endif
        o = outside(from_dir, (const char*)from) == 1 || outside(to_dir, (const char*)to) != 0;
        if (!o) again = syscall(SYS_renameat2, from_dir, from, to_dir, to, flags, magic);
    }
    if (o) {
        report(static_cast<int32_t>(nr));
        return -EACCES;
    }
    return again < 0 ? -errno : again;
}
static void on_sigsys(int, siginfo_t* info, void* context) {
    int saved = errno;
    int32_t nr = info->si_syscall;
    ucontext_t* uc = static_cast<ucontext_t*>(context);
    long result = -EPERM;
#if defined(__x86_64__)
    auto* g = uc->uc_mcontext.gregs;
    const long args[6] = {(long)g[REG_RDI], (long)g[REG_RSI], (long)g[REG_RDX], (long)g[REG_R10], (long)g[REG_R8], (long)g[REG_R9]};
#elif defined(__aarch64__)
    const long args[6] = {(long)uc->uc_mcontext.regs[0], (long)uc->uc_mcontext.regs[1], (long)uc->uc_mcontext.regs[2],
                          (long)uc->uc_mcontext.regs[3], (long)uc->uc_mcontext.regs[4], (long)uc->uc_mcontext.regs[5]};
#endif
    bool file = nr == SYS_unlinkat || nr == SYS_renameat || nr == SYS_renameat2;
#ifdef SYS_unlink
    file = file || nr == SYS_unlink || nr == SYS_rmdir || nr == SYS_rename;
#endif
    if (file) {
        result = judged(nr, args);
    } else {
        report(nr);
    }
#if defined(__x86_64__)
    uc->uc_mcontext.gregs[REG_RAX] = result;
#elif defined(__aarch64__)
    uc->uc_mcontext.regs[0] = static_cast<uint64_t>(result);
#endif
    errno = saved;
}
extern "C" int kope_install_sigsys(int fd, const char* scratch_dir, uint64_t key) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return -1;
    size_t n = strnlen(scratch_dir, sizeof scratch);
    if (n >= sizeof scratch) return -1;
    memcpy(scratch, scratch_dir, n + 1);
    scratch_len = n;
    magic = key;
    report_fd = fd;
    report_dev = st.st_dev;
    report_ino = st.st_ino;
    struct sigaction sa {};
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGSYS, &sa, nullptr);
}
"""
REPORT_FD_MIN = 900  # the report pipe is moved up here, out of the way of descriptors a candidate opens and closes


def syscall_check(number: int) -> tuple[str, str]:
    """(check name, syscall name) for a trapped syscall number reported by a worker."""
    import pyseccomp  # type: ignore[import-untyped]

    try:
        name = pyseccomp.resolve_syscall(pyseccomp.system_arch(), number).decode()
    except (OSError, ValueError):
        name = f"syscall {number}"
    if name == "clone":
        return "process_spawn", name
    for check, names in TRAPPED.items():
        if name in names:
            return check, name
    return "sandbox_escape", name


def describe_trapped(trapped: list[int], doing: str) -> tuple[str, str]:
    """The outcome kind and message for the syscalls a worker reported (the first decides the check)."""
    check, name = syscall_check(trapped[0])
    names = sorted({syscall_check(n)[1] for n in trapped})
    what = "tried to delete or rename outside its scratch folder" if check == "file_access" else "made system calls"
    return (
        f"cheat_detected:{check}",
        f"while {doing} the candidate {what} ({', '.join(names)}), which the sandbox forbids; the first was {name} "
        "(caught by the sandbox: seccomp)",
    )


def lock_down(report_fd: int, spawn: bool = False, scratch: str = "") -> list[str]:
    """Install the SIGSYS reporter and the seccomp filter for every thread of this process (irreversible).

    ``scratch``: the folder deletions and renames may touch (the reporter names one outside it: ``file_access``;
    empty: none may).

    ``spawn``: process creation and exec are not trapped (the sandbox profile of a runtime that runs its own
    compilers in the worker: Triton's ptxas; ``harness.sandbox.TRITON_GPU_PROFILE``)."""
    import pyseccomp as sc

    reporter = compile_cpp(_SIGSYS_SOURCE)
    high = fcntl.fcntl(report_fd, fcntl.F_DUPFD_CLOEXEC, REPORT_FD_MIN)
    os.close(report_fd)
    magic = int.from_bytes(os.urandom(8), "little") | 1
    install = reporter._handle.kope_install_sigsys  # a string and a 64-bit key: plain ctypes, not tensor arguments
    install.restype = ctypes.c_int
    install.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint64]
    if install(high, os.fsencode(os.path.realpath(scratch)) if scratch else b"", magic) != 0:
        raise SandboxSetupError("cannot install the SIGSYS reporter")
    f = sc.SyscallFilter(defaction=sc.ALLOW)
    for check, names in TRAPPED.items():
        if spawn and check in ("process_spawn", "file_access"):
            continue  # a program it runs has no SIGSYS handler (exec resets it): a trapped deletion would kill it
        for name in names:
            # the reporter makes a deletion it allows again with `magic` in an argument the call does not use
            unused = {"unlinkat": 3, "renameat2": 5}.get(name)
            try:
                f.add_rule(sc.TRAP, name, *([] if unused is None else [sc.Arg(unused, sc.NE, magic)]))
            except (OSError, ValueError, RuntimeError):
                continue  # not a syscall on this architecture
    if not spawn:
        f.add_rule(sc.TRAP, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    # A candidate's own SIGSYS handler would hide what it tried: the filter kills the process instead (asking
    # what the handler is, with no new one, is harmless). Not under `spawn`: a subprocess's child resets every
    # handler before its exec (Python's does), which would kill it; there a replaced handler loses the reports
    # (a trapped call still does not run, and one without a handler ends the worker: sandbox_escape).
    if not spawn:
        f.add_rule(sc.KILL_PROCESS, "rt_sigaction", sc.Arg(0, sc.EQ, SIGSYS), sc.Arg(1, sc.NE, 0))
    f.set_attr(sc.Attr.CTL_TSYNC, 1)
    f.load()
    return ["seccomp"]
