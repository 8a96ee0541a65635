"""The candidate worker's seccomp layer (right before candidate code is imported).

docs/harness.md, "Module notes".
"""

from __future__ import annotations

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
}
CLONE_THREAD = 0x00010000
SIGSYS = 31

# The report channel: one little-endian int32 syscall number per trapped call. The reporter checks, before each
# report, that its descriptor is still the pipe it was given (same device and inode): a candidate that closed it,
# or put another file in its place, would otherwise make trapped calls go unreported. A broken channel ends the
# worker the way the filter ends a handler change (SIGSYS; the parent reports cheat_detected:sandbox_escape).
_SIGSYS_SOURCE = r"""
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
static int report_fd = -1;
static dev_t report_dev = 0;
static ino_t report_ino = 0;
static void channel_broken(void) {
    // rt_sigaction(SIGSYS) is what the filter answers with SIGSYS for the whole process
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    syscall(SYS_rt_sigaction, SIGSYS, &sa, nullptr, 8);
    _exit(159);  // not reached
}
static void on_sigsys(int, siginfo_t* info, void* context) {
    int saved = errno;
    int32_t nr = info->si_syscall;
    struct stat st;
    if (report_fd < 0 || fstat(report_fd, &st) != 0 || st.st_dev != report_dev || st.st_ino != report_ino ||
        write(report_fd, &nr, sizeof nr) != static_cast<ssize_t>(sizeof nr)) {
        channel_broken();
    }
    ucontext_t* uc = static_cast<ucontext_t*>(context);
#if defined(__x86_64__)
    uc->uc_mcontext.gregs[REG_RAX] = -EPERM;
#elif defined(__aarch64__)
    uc->uc_mcontext.regs[0] = static_cast<uint64_t>(-EPERM);
#endif
    errno = saved;
}
extern "C" int kope_install_sigsys(int fd) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return -1;
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


def lock_down(report_fd: int, spawn: bool = False) -> list[str]:
    """Install the SIGSYS reporter and the seccomp filter for every thread of this process (irreversible).

    ``spawn``: process creation and exec are not trapped (the sandbox profile of a runtime that runs its own
    compilers in the worker: Triton's ptxas; ``harness.sandbox.TRITON_GPU_PROFILE``)."""
    import pyseccomp as sc

    reporter = compile_cpp(_SIGSYS_SOURCE)
    high = fcntl.fcntl(report_fd, fcntl.F_DUPFD_CLOEXEC, REPORT_FD_MIN)
    os.close(report_fd)
    if reporter.kope_install_sigsys(high) != 0:
        raise SandboxSetupError("cannot install the SIGSYS reporter")
    f = sc.SyscallFilter(defaction=sc.ALLOW)
    for check, names in TRAPPED.items():
        if spawn and check == "process_spawn":
            continue
        for name in names:
            try:
                f.add_rule(sc.TRAP, name)
            except (OSError, ValueError, RuntimeError):
                continue  # not a syscall on this architecture
    if not spawn:
        f.add_rule(sc.TRAP, "clone", sc.Arg(0, sc.MASKED_EQ, CLONE_THREAD, 0))
    f.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    # A candidate's own SIGSYS handler would hide what it tried: the filter kills the process instead.
    f.add_rule(sc.KILL_PROCESS, "rt_sigaction", sc.Arg(0, sc.EQ, SIGSYS))
    f.set_attr(sc.Attr.CTL_TSYNC, 1)
    f.load()
    return ["seccomp"]
