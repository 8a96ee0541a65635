"""A harness module run on code from outside the project (a task file) in the sandbox, under a wall-clock timeout.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import ctypes
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import harness.sandbox as sandbox
from harness import settings
from harness.commands import cache_root
from harness.errors import SandboxUnavailableError

DEFAULT_MEMORY_BYTES = 16 << 30  # address space: torch's import maps ~2 GiB of it; the rest is the task's
DEFAULT_FILE_BYTES = 64 << 20  # the largest file (its report included) the child may write
REPORT_KEEP = 64 << 20  # at most this much of the child's report is read back
OUTPUT_KEEP = 4000  # the tail of the child's stderr kept for messages
# Variables that may hold credentials: never handed to task code, not even without the sandbox.
_SECRET = re.compile(r"(PASSWORD|PASSWD|SECRET|TOKEN|API_KEY|APIKEY|CREDENTIAL|_KEY$)", re.IGNORECASE)
_PR_SET_NO_NEW_PRIVS = 38


@dataclass
class Finished:
    """What the child left: its exit status (``None``: killed at the timeout), report and stderr's tail."""

    returncode: int | None
    report: bytes
    output: str
    sandboxed: bool

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def describe_exit(self) -> str:
        """``status 3`` or ``signal SIGXCPU`` for a message."""
        code = self.returncode
        if code is not None and code < 0:
            try:
                return f"signal {signal.Signals(-code).name}"
            except ValueError:
                return f"signal {-code}"
        return f"status {code}"


def use_sandbox() -> bool:
    """Whether task code is sandboxed here; ``SandboxUnavailableError`` where it should be and cannot be."""
    if sandbox.opted_out():
        return False
    status = sandbox.sandbox_status()
    if status.available:
        return True
    raise SandboxUnavailableError(
        f"the sandbox for task code cannot be set up on this machine: {status.reason}",
        hint=f"task files are code from outside KOPE; to run them without the sandbox anyway set "
        f"{settings.SANDBOX}=off",
    )


def private_roots(extra: Iterable[str | Path] = ()) -> list[Path]:
    """Folders whose contents task code never needs and may not read: the harness cache, the compiled-extension
    caches a target names (other candidates' kernels), and ``extra`` (a worker service's evaluations folder)."""
    roots = [
        cache_root(),
        *(Path(os.environ[v]) for v in ("TORCH_EXTENSIONS_DIR", "TRITON_CACHE_DIR") if v in os.environ),
    ]
    return [*roots, *(Path(p) for p in extra)]


def private_paths(reads: Iterable[str | Path] = (), private: Iterable[str | Path] = ()) -> tuple[list[str], list[str]]:
    """(folders, files) to hide: every entry of each private root (``private_roots(private)``), except the
    folders on the way to ``reads`` (a task file the worker service keeps under its evaluations folder)."""
    wanted = []
    for path in reads:
        try:
            wanted.append(Path(path).resolve())
        except OSError:
            continue
    folders: list[str] = []
    files: list[str] = []

    def walk(folder: Path, keep: set[Path]) -> None:
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            return
        for entry in entries:
            if entry.is_symlink():
                continue  # a link points somewhere the view shows (or hides) anyway
            if entry in keep and entry.is_dir():
                walk(entry, keep)  # on the way to a file the child reads: hide its other entries
            elif entry.is_dir():
                folders.append(str(entry))
            elif entry.is_file() and entry not in wanted:
                files.append(str(entry))

    for root in private_roots(private):
        try:
            root = root.resolve()
        except OSError:
            continue
        if not root.is_dir() or any(root.is_relative_to(Path(f)) for f in folders):
            continue
        keep = {parent for p in wanted if p.is_relative_to(root) for parent in p.parents if parent.is_relative_to(root)}
        walk(root, keep)
    return sorted(set(folders)), sorted(set(files))


def command(
    module: str,
    args: Sequence[str],
    scratch: Path,
    *,
    sandboxed: bool,
    reads: Iterable[str | Path] = (),
    private: Iterable[str | Path] = (),
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
    cpu_s: float | None = None,
    threads: int = 1,
    gpu: bool = False,
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of ``python -m module args`` for this module's child."""
    root = str(Path(__file__).resolve().parent.parent)
    threads_env = {k: str(threads) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}
    target = [sys.executable, "-m", module, *args]
    if not sandboxed:
        env = {k: v for k, v in os.environ.items() if not _SECRET.search(k)}
        env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.update(threads_env)
        return target, env
    folders, files = private_paths(reads, private)
    hidden = sandbox.hidden_paths(folders)
    wrapper = [sys.executable, "-S", "-m", "harness.isolated", "enter", "--scratch", str(scratch)]
    for h in hidden:
        wrapper += ["--hide", h]
    for f in files:
        wrapper += ["--hide-file", f]
    wrapper += ["--file-bytes", str(DEFAULT_FILE_BYTES), "--landlock"]
    if gpu:  # the driver's device nodes are opened read-write; CUDA maps far more than any useful limit
        for device in sandbox.GPU_PROFILE.device_paths():
            wrapper += ["--device", device]
    else:
        wrapper += ["--memory-bytes", str(memory_bytes)]
    if cpu_s is not None:
        wrapper += ["--cpu-s", str(max(1, int(cpu_s + 0.999)))]
    env = sandbox.clean_env({"PYTHONPATH": root, "PYTHONDONTWRITEBYTECODE": "1", **threads_env})
    return [*sandbox.launcher(), *wrapper, "--", *target], env


def run_module(
    module: str,
    args: Sequence[str],
    *,
    timeout_s: float,
    reads: Iterable[str | Path] = (),
    private: Iterable[str | Path] = (),
    memory_bytes: int = DEFAULT_MEMORY_BYTES,
    cpu_s: float | None = None,
    threads: int = 1,
    gpu: bool = False,
) -> Finished:
    """Run ``python -m module args`` in the sandbox (see the module docstring) and wait at most ``timeout_s``."""
    sandboxed = use_sandbox()
    scratch = Path(tempfile.mkdtemp(prefix="kope-isolated-"))
    try:
        cmd, env = command(
            module,
            args,
            scratch,
            sandboxed=sandboxed,
            reads=reads,
            private=private,
            memory_bytes=memory_bytes,
            cpu_s=cpu_s,
            threads=threads,
            gpu=gpu,
        )
        with tempfile.TemporaryFile() as report, tempfile.TemporaryFile() as output:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=report,
                stderr=output,
                cwd=scratch,
                env=env,
                start_new_session=True,
            )
            code: int | None
            try:
                code = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                code = None
            finally:
                kill_group(proc)  # whatever the task started in its session (outside the sandbox) goes too
            report.seek(0)
            data = report.read(REPORT_KEEP)
            output.seek(0, os.SEEK_END)
            output.seek(max(0, output.tell() - OUTPUT_KEEP))
            text = output.read().decode(errors="replace").strip()
        return Finished(code, data, text, sandboxed)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL ``proc``'s process group (its namespace's PID 1 goes with the launcher) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


# -- inside the namespaces ------------------------------------------------------------------------------------


def _drop_capabilities() -> None:
    """No capability after ``exec`` (the compile sandbox's ``sandbox.drop_capabilities``), and no new privileges."""
    sandbox.drop_capabilities()
    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise sandbox.SandboxSetupError("PR_SET_NO_NEW_PRIVS failed")


def _hide_file(path: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if os.path.isfile(path) and libc.mount(b"/dev/null", path.encode(), None, 4096, None) != 0:  # MS_BIND
        raise sandbox.SandboxSetupError(f"cannot hide {path}: {os.strerror(ctypes.get_errno())}")


def enter_main(argv: list[str]) -> None:
    """``python -S -m harness.isolated enter --scratch DIR [--hide DIR]... [--hide-file F]... [--memory-bytes N]
    [--cpu-s N] [--file-bytes N] [--landlock [--device NODE]...] -- CMD...``: the layers, then exec CMD."""
    options: dict[str, list[str]] = {}
    flags = {"--landlock"}
    i = 0
    while i < len(argv) and argv[i] != "--":
        if argv[i] in flags:
            options.setdefault(argv[i], []).append("1")
            i += 1
        else:
            options.setdefault(argv[i], []).append(argv[i + 1])
            i += 2
    command = argv[i + 1 :]
    scratch = options["--scratch"][0]
    sandbox.enter_view(scratch=scratch, hidden=options.get("--hide", []))
    for path in options.get("--hide-file", []):
        _hide_file(path)
    if "--landlock" in options:  # last of the mounts: a landlocked process cannot mount
        sandbox.restrict_writes(scratch, options.get("--device", []))
    file_bytes = int(options.get("--file-bytes", [str(DEFAULT_FILE_BYTES)])[0])
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if "--memory-bytes" in options:
        limit = int(options["--memory-bytes"][0])
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    if "--cpu-s" in options:
        seconds = int(options["--cpu-s"][0])
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 5))  # SIGXCPU, then SIGKILL
    _drop_capabilities()
    os.execvp(command[0], command)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "enter":
        try:
            enter_main(sys.argv[2:])
        except (sandbox.SandboxSetupError, OSError, KeyError, IndexError, ValueError) as exc:
            sys.stderr.write(f"sandbox: {exc}\n")
            os._exit(126)
