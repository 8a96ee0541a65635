"""The OS-level sandbox every harness worker (and every compiler run) lives in, on Linux.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from harness import settings

# Folders an evaluation never needs and that hold secrets, relative to $HOME; hidden behind an empty tmpfs.
HIDDEN_HOME = (".ssh", ".gnupg", ".aws", ".azure", ".kube", ".docker", ".config", ".netrc", ".local/share/kope/neo4j")

# Thread counts, locale and the runtime variables a target needs are passed; everything else is dropped.
PASS_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "LD_LIBRARY_PATH", "CXX", "CC")


# -- parent side ---------------------------------------------------------------------------------


# The NVIDIA driver's device nodes: the control node, one per GPU, unified memory, modeset, MIG capabilities.
NVIDIA_DEVICES = (
    "/dev/nvidiactl",
    "/dev/nvidia[0-9]*",
    "/dev/nvidia-uvm",
    "/dev/nvidia-uvm-tools",
    "/dev/nvidia-modeset",
    "/dev/nvidia-caps/*",
)
# What the driver and the CUDA runtime read besides them (readable in every profile: the view is read-only,
# Landlock restricts writes only; listed so that ``kope doctor`` and the tests can check they are visible).
NVIDIA_READS = ("/proc/driver/nvidia", "/sys/bus/pci/devices", "/sys/module/nvidia", "/proc/self/maps")


@dataclass(frozen=True)
class SandboxProfile:
    """What one kind of worker needs opened in the sandbox; every other layer stays as it is.

    docs/harness.md, "Module notes".
    """

    name: str
    devices: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    rlimit_as: bool = True
    device_memory_fraction: float | None = None
    spawn: bool = False
    scratch_env: tuple[str, ...] = ()

    def device_paths(self) -> list[str]:
        """The device nodes of ``devices`` that exist on this machine."""
        import glob

        return sorted({p for pattern in self.devices for p in glob.glob(pattern) if os.path.exists(p)})

    def to_config(self) -> dict:
        return {
            "name": self.name,
            "devices": self.device_paths(),
            "rlimit_as": self.rlimit_as,
            "device_memory_fraction": self.device_memory_fraction,
            "spawn": self.spawn,
            "scratch_env": list(self.scratch_env),
        }

    def layers(self) -> dict[str, str]:
        """Each layer under this profile, as ``kope doctor`` shows it: "holds" or how it is opened, and why."""
        out = {
            "namespaces": "holds (user, PID, mount, network, IPC)",
            "view": "holds (read-only tree, private scratch, hidden folders)"
            + (
                f"; device nodes visible: {', '.join(self.device_paths()) or 'none on this machine'}"
                if self.devices
                else ""
            ),
            "landlock": "holds (writes only beneath scratch)"
            + (
                "; plus read-write opens of the driver's device nodes (ioctl is not restricted)" if self.devices else ""
            ),
            "seccomp": "holds (process creation, exec, sockets, ptrace, mounts trapped)"
            if not self.spawn
            else "weakened: process creation and exec allowed (Triton runs ptxas and a C compiler in the worker); "
            "sockets, ptrace, cross-process memory, mounts, bpf stay trapped",
            "rlimits": "holds (file size, no core dumps, address space)"
            if self.rlimit_as
            else "no address-space limit (CUDA reserves huge virtual ranges); file size and core dumps hold; "
            f"device memory capped at {self.device_memory_fraction or 1.0:.0%} through the CUDA allocator, "
            "resident memory by the parent's watcher",
        }
        return out


CPU_PROFILE = SandboxProfile("cpu")
GPU_PROFILE = SandboxProfile(
    "gpu", devices=NVIDIA_DEVICES, reads=NVIDIA_READS, rlimit_as=False, device_memory_fraction=0.9
)
TRITON_GPU_PROFILE = SandboxProfile(
    "triton-gpu",
    devices=NVIDIA_DEVICES,
    reads=NVIDIA_READS,
    rlimit_as=False,
    device_memory_fraction=0.9,
    spawn=True,
    scratch_env=("TRITON_CACHE_DIR",),
)
PROFILES = {p.name: p for p in (CPU_PROFILE, GPU_PROFILE, TRITON_GPU_PROFILE)}


@dataclass(frozen=True)
class SandboxStatus:
    """What the sandbox can do on this machine; ``available`` is the verdict."""

    available: bool
    layers: dict[str, str] = field(default_factory=dict)  # layer -> "ok" or why not
    reason: str | None = None  # why not available (None when it is)

    def describe(self) -> str:
        parts = ", ".join(f"{k}: {v}" for k, v in self.layers.items())
        return ("available" if self.available else f"unavailable ({self.reason})") + (f" [{parts}]" if parts else "")


def opted_out() -> bool:
    """True when the user switched the sandbox off with ``KOPE_HARNESS_SANDBOX=off``."""
    return settings.sandbox_opted_out()


def launcher() -> list[str]:
    """The command prefix that starts a process in fresh namespaces (``unshare`` from util-linux)."""
    unshare = shutil.which("unshare") or "unshare"
    return [
        unshare,
        "--user",
        "--map-root-user",
        "--pid",
        "--fork",
        "--kill-child",
        "--net",
        "--ipc",
        "--mount",
        "--mount-proc",
        "--",
    ]


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    """The environment of a sandboxed process: the few variables in PASS_ENV, then ``extra``."""
    env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    env.update(extra)
    return {k: v for k, v in env.items() if not k.startswith("KOPE_")}


def hidden_paths(extra: Iterable[str | Path] = ()) -> list[str]:
    """Existing folders to hide from sandboxed processes (their contents are replaced by nothing)."""
    home = Path.home()
    found = [home / h for h in HIDDEN_HOME]
    data = os.environ.get("KOPE_DATA_DIR")
    if data:
        found.append(Path(data) / "neo4j")  # the local server's data and password (run folders may live beside it)
    found.extend(Path(p) for p in extra)
    out = []
    for p in found:
        try:
            if p.is_dir() and not p.is_symlink():
                out.append(str(p.resolve()))
        except OSError:
            continue
    return sorted(set(out))


@functools.cache
def sandbox_status() -> SandboxStatus:
    """Probe every layer once per process (a namespaced ``true``, libseccomp, landlock)."""
    layers: dict[str, str] = {}
    if sys.platform != "linux":
        return SandboxStatus(False, {"namespaces": "not Linux"}, f"the sandbox needs Linux, this is {sys.platform}")
    if shutil.which("unshare") is None:
        layers["namespaces"] = "no unshare command (util-linux)"
    else:
        try:
            proc = subprocess.run(
                [*launcher(), sys.executable, "-S", "-c", "import os; print(os.getpid())"],
                capture_output=True,
                text=True,
                timeout=30,
                env=clean_env({}),
            )
            ok = proc.returncode == 0 and proc.stdout.strip() == "1"
            layers["namespaces"] = "ok" if ok else (proc.stderr.strip().splitlines() or ["failed"])[-1]
        except (OSError, subprocess.TimeoutExpired) as exc:
            layers["namespaces"] = f"cannot run unshare: {exc}"
    try:
        import pyseccomp  # type: ignore[import-untyped]  # noqa: F401

        layers["seccomp"] = "ok"
    except (ImportError, OSError) as exc:  # pyseccomp raises OSError when libseccomp.so.2 is missing
        layers["seccomp"] = f"pyseccomp/libseccomp unavailable: {exc}"
    abi = landlock_abi()
    layers["landlock"] = f"ok (ABI {abi})" if abi > 0 else "not available in this kernel (optional)"
    missing = [k for k in ("namespaces", "seccomp") if layers.get(k) != "ok"]
    if missing:
        reason = "; ".join(f"{k}: {layers[k]}" for k in missing)
        return SandboxStatus(False, layers, reason)
    return SandboxStatus(True, layers, None)


# -- worker side: the view -------------------------------------------------------------------------

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_NR = {  # syscall numbers (x86_64, aarch64)
    "x86_64": {
        "mount_setattr": 442,
        "landlock_create_ruleset": 444,
        "landlock_add_rule": 445,
        "landlock_restrict_self": 446,
    },
    "aarch64": {
        "mount_setattr": 442,
        "landlock_create_ruleset": 444,
        "landlock_add_rule": 445,
        "landlock_restrict_self": 446,
    },
}
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 1, 2, 4, 16384, 1 << 18
AT_FDCWD, AT_RECURSIVE = -100, 0x8000
MOUNT_ATTR_RDONLY = 0x1


class SandboxSetupError(RuntimeError):
    """A layer of the sandbox could not be set up inside the worker."""


def _nr(name: str) -> int:
    machine = os.uname().machine
    try:
        return _NR[machine][name]
    except KeyError:
        raise SandboxSetupError(f"no syscall number for {name} on {machine}") from None


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise SandboxSetupError(f"{what}: {os.strerror(err)} (errno {err})")


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWPID = 0x00020000, 0x08000000, 0x40000000, 0x20000000
MS_NOEXEC = 8


def unshare_worker_namespaces() -> None:
    """New mount, PID, IPC and network namespaces for a worker forked by the zygote (``harness.zygote``), as
    ``launcher()`` gives a worker it starts: the next child of the caller is PID 1 of the new PID namespace."""
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWNET), "unshare (worker namespaces)")


def mount_proc() -> None:
    """A fresh ``/proc`` for the caller's PID namespace (it shows that namespace's processes only)."""
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None) -> None:
    result = _libc.mount(
        source.encode(), target.encode(), fstype.encode() if fstype else None, flags, data.encode() if data else None
    )
    _check(result, f"mount {fstype or source} on {target}")


def enter_view(scratch: str | None, hidden: Iterable[str], writable: Iterable[str] = ()) -> None:
    """Make the file tree read-only, ``scratch`` a private tmpfs, ``hidden`` folders empty (needs a mount namespace).

    ``writable`` folders keep their contents and stay writable (a compiler's output folder)."""
    _mount("none", "/", None, MS_REC | MS_PRIVATE, None)
    # Bind the folders that stay writable onto themselves first, so they survive the read-only pass.
    keep = [w for w in writable if os.path.isdir(w)]
    attr = _MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    _check(
        _libc.syscall(_nr("mount_setattr"), AT_FDCWD, b"/", AT_RECURSIVE, ctypes.byref(attr), ctypes.sizeof(attr)),
        "making the file tree read-only",
    )
    if scratch is not None:
        _mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=50%")
    for path in keep:  # a writable bind of an existing folder (e.g. a compiler's output folder)
        _mount(path, path, None, 4096 | MS_REC, None)  # MS_BIND
        clear = _MountAttr(0, MOUNT_ATTR_RDONLY, 0, 0)
        _check(
            _libc.syscall(
                _nr("mount_setattr"), AT_FDCWD, path.encode(), AT_RECURSIVE, ctypes.byref(clear), ctypes.sizeof(clear)
            ),
            f"making {path} writable",
        )
    inside = [p for p in (scratch, *keep) if p]
    for path in hidden:
        if os.path.isdir(path) and not any(p == path or p.startswith(path.rstrip("/") + "/") for p in inside):
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "mode=0500,size=4k")
    if scratch is not None:
        os.chdir(scratch)
        os.environ["HOME"] = scratch
        os.environ["TMPDIR"] = scratch


# -- worker side: landlock -------------------------------------------------------------------------

_LL_FS_WRITE = {  # access right -> first ABI that has it
    1 << 1: 1,  # WRITE_FILE
    1 << 4: 1,  # REMOVE_DIR
    1 << 5: 1,  # REMOVE_FILE
    1 << 6: 1,  # MAKE_CHAR
    1 << 7: 1,  # MAKE_DIR
    1 << 8: 1,  # MAKE_REG
    1 << 9: 1,  # MAKE_SOCK
    1 << 10: 1,  # MAKE_FIFO
    1 << 11: 1,  # MAKE_BLOCK
    1 << 12: 1,  # MAKE_SYM
    1 << 13: 2,  # REFER
    1 << 14: 3,  # TRUNCATE
}
_LL_NET = (1 << 0) | (1 << 1)  # BIND_TCP, CONNECT_TCP (ABI 4)
_LL_SCOPE = (1 << 0) | (1 << 1)  # ABSTRACT_UNIX_SOCKET, SIGNAL (ABI 6)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0: not available)."""
    try:
        version = _libc.syscall(_nr("landlock_create_ruleset"), None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except SandboxSetupError:
        return 0
    return max(0, int(version))


def restrict_writes(scratch: str, devices: Iterable[str] = ()) -> int:
    """Landlock: file-system writes only beneath ``scratch`` (and to ``/dev/null`` and the profile's ``devices``,
    which the GPU driver opens read-write); no TCP; scoped signals. Returns the ABI used (0: none)."""
    abi = landlock_abi()
    if abi <= 0:
        return 0
    fs = sum(bit for bit, since in _LL_FS_WRITE.items() if abi >= since)
    attr = _RulesetAttr(fs, _LL_NET if abi >= 4 else 0, _LL_SCOPE if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = _libc.syscall(
        _nr("landlock_create_ruleset"), ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
    )
    if ruleset < 0:
        raise SandboxSetupError(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        node = (1 << 1) | ((1 << 14) if abi >= 3 else 0)  # WRITE_FILE, TRUNCATE
        for path, rights in ((scratch, fs), ("/dev/null", node), *((d, node) for d in devices if os.path.exists(d))):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = _PathBeneath(rights if os.path.isdir(path) else rights & ((1 << 1) | (1 << 14)), fd)
                _check(
                    _libc.syscall(_nr("landlock_add_rule"), ruleset, 1, ctypes.byref(rule), 0), f"landlock rule {path}"
                )
            finally:
                os.close(fd)
        _check(_libc.prctl(38, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
        _check(_libc.syscall(_nr("landlock_restrict_self"), ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


# -- a sandboxed command (the compiler) ---------------------------------------------------------------

_PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP, _PR_SET_SECUREBITS, _PR_CAP_AMBIENT = 38, 24, 28, 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
# SECBIT_NOROOT, NO_SETUID_FIXUP, KEEP_CAPS off, each locked: uid 0 of the namespace gets no capability from exec
_SECUREBITS = 0x01 | 0x02 | 0x04 | 0x08 | 0x20
_CAP_VERSION_3 = 0x20080522


def drop_capabilities() -> None:
    """Give up every capability for good (needs the namespace's CAP_SETPCAP, so it comes after the mounts).

    The bounding set is emptied, the securebits make uid 0 an ordinary user on exec (locked), the
    ambient set is cleared, then the effective, permitted and inheritable sets: neither this process
    nor anything it execs can mount, remount the read-only view or change namespaces' settings."""
    _check(_libc.prctl(_PR_SET_SECUREBITS, _SECUREBITS, 0, 0, 0), "PR_SET_SECUREBITS")
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        _check(_libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0), f"PR_CAPBSET_DROP {cap}")
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL on kernels without ambient caps
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(_libc.capset(header, data), "capset (no capabilities)")


# System calls no sandboxed process needs: reading or writing another process's memory, and leaving or changing
# the sandbox (mounts, namespaces, kernel modules, keyrings, BPF, perf, raw I/O). One list for both sandboxes:
# the candidate's seccomp filter traps them and reports a check (harness.seccomp.TRAPPED), the compiler's denies them.
MEMORY_SYSCALLS = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "userfaultfd")
ESCAPE_SYSCALLS = (
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsmount",
    "fsconfig",
    "fspick",
    "mount_setattr",
    "bpf",
    "perf_event_open",
    "keyctl",
    "add_key",
    "request_key",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "iopl",
    "ioperm",
)
# What a compiler never does; each fails with EPERM (the compile sandbox has no reporter to trap to). Its
# capabilities are gone already; capset keeps them gone.
COMPILER_DENIED = (*MEMORY_SYSCALLS, *ESCAPE_SYSCALLS, "capset")
_CLONE_NEW_FLAGS = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000)


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def compiler_seccomp() -> None:
    """The compile sandbox's seccomp filter (libseccomp through ctypes: this process runs without site-packages):
    ``COMPILER_DENIED`` and ``clone`` with any namespace flag fail with EPERM, ``clone3`` with ENOSYS (the C
    library falls back to ``clone``, whose flags the filter can read). Processes and exec stay allowed: a
    compiler runs its own stages."""
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError as exc:
        raise SandboxSetupError(f"libseccomp: {exc}") from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    allow, eperm, enosys = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 38
    ctx = lib.seccomp_init(allow)
    if not ctx:
        raise SandboxSetupError("seccomp_init failed")
    try:

        def rule(action: int, name: str, *cmps: _ArgCmp) -> None:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:
                return  # not a syscall on this architecture
            array = (_ArgCmp * max(1, len(cmps)))(*cmps)
            result = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), array)
            if result < 0:
                raise SandboxSetupError(f"seccomp rule for {name}: {os.strerror(-result)}")

        for name in COMPILER_DENIED:
            rule(eperm, name)
        for flag in _CLONE_NEW_FLAGS:
            rule(eperm, "clone", _ArgCmp(0, 7, flag, flag))  # SCMP_CMP_MASKED_EQ: (flags & flag) == flag
        rule(enosys, "clone3")
        _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
        result = lib.seccomp_load(ctx)
        if result < 0:
            raise SandboxSetupError(f"seccomp_load: {os.strerror(-result)}")
    finally:
        lib.seccomp_release(ctx)


def exec_main(argv: list[str]) -> None:
    """``python -m harness.sandbox exec --writable DIR [--hide DIR]... -- CMD...``: the compile sandbox, then CMD.

    In order: the view (read-only tree, ``DIR`` writable, hidden folders empty); every capability
    dropped (nothing can remount the view); Landlock (writes beneath ``DIR`` only, no TCP, scoped
    signals); seccomp (mounts, namespaces, ptrace, cross-process memory, bpf, keyrings, modules
    denied); then exec. ``TMPDIR`` is ``DIR`` (the compiler's temporary files)."""
    writable, hidden, i = [], [], 0
    while i < len(argv) and argv[i] != "--":
        if argv[i] == "--writable":
            writable.append(argv[i + 1])
        elif argv[i] == "--hide":
            hidden.append(argv[i + 1])
        i += 2
    command = argv[i + 1 :]
    enter_view(scratch=None, hidden=hidden, writable=writable)
    os.chdir(writable[0] if writable else "/")
    drop_capabilities()
    restrict_writes(writable[0] if writable else "/dev/null")
    compiler_seccomp()
    if writable:
        os.environ["TMPDIR"] = writable[0]
    os.execvp(command[0], command)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "exec":
        try:
            exec_main(sys.argv[2:])
        except (SandboxSetupError, OSError) as exc:
            sys.stderr.write(f"sandbox: {exc}\n")
            os._exit(126)
