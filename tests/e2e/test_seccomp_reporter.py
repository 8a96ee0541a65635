"""The SIGSYS reporter judges deletions and renames (issue 33, item 5: blocked deletions were not named).

A process locks itself down with ``harness.seccomp.lock_down`` (the candidate worker's filter and reporter, here
without the rest of the sandbox) and makes the calls natively through libc: those that touch an existing entry
outside its scratch folder, however the path is spelled, are refused with EACCES and reported on the pipe; those
inside scratch, or of an entry that does not exist, go through as usual.
"""

from __future__ import annotations

import ast
import ctypes
import os
import struct
from pathlib import Path

import pytest

from harness.sandbox import sandbox_status

pytestmark = pytest.mark.skipif(not sandbox_status().available, reason="no seccomp on this machine")
AT_FDCWD, AT_REMOVEDIR = -100, 0x200


def _child(body, scratch: str = "", spawn: bool = False) -> tuple[int, bytes, bytes]:
    """Run ``body()`` -> (exit code, output bytes) in a forked child after ``lock_down``: its exit code, the syscall
    numbers it reported, its output."""
    from harness.seccomp import lock_down

    r, w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(r)
            os.close(out_r)
            lock_down(w, spawn=spawn, scratch=scratch)
            code, output = body()
            os.write(out_w, output)
        finally:
            os._exit(code)
    os.close(w)
    os.close(out_w)
    _, status = os.waitpid(pid, 0)
    reported, output = os.read(r, 4096), os.read(out_r, 65536)
    os.close(r)
    os.close(out_r)
    return os.waitstatus_to_exitcode(status), reported, output


def _locked_down(scratch: Path, calls) -> tuple[dict, list[str]]:
    """Run ``calls(libc)`` (name -> (result, errno)) in a locked-down child; its results and reported syscalls."""
    from harness.seccomp import syscall_check

    code, reported, results = _child(lambda: (0, repr(calls(ctypes.CDLL(None, use_errno=True))).encode()), str(scratch))
    assert code == 0
    names = [syscall_check(n) for n in struct.unpack(f"<{len(reported) // 4}i", reported)]
    assert all(check == "file_access" for check, _ in names), names
    return ast.literal_eval(results.decode()), [name for _, name in names]


def _call(fn, *args):
    result = fn(*args)
    return result, ctypes.get_errno() if result < 0 else 0


def test_deletions_and_renames_inside_scratch_go_through(tmp_path):
    scratch = tmp_path / "scratch"
    (scratch / "d").mkdir(parents=True)
    (scratch / "a").write_text("a")
    (scratch / "b").write_text("b")

    def calls(libc):
        fd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
        return {
            "rename": _call(libc.rename, str(scratch / "a").encode(), str(scratch / "a2").encode()),
            "renameat": _call(libc.renameat, fd, b"a2", fd, b"a3"),
            "unlinkat": _call(libc.unlinkat, fd, b"a3", 0),
            "unlink": _call(libc.unlink, str(scratch / "b").encode()),
            "rmdir": _call(libc.rmdir, str(scratch / "d").encode()),
            "missing_outside": _call(libc.unlink, str(tmp_path / "never-there").encode()),
        }

    results, reported = _locked_down(scratch, calls)
    assert results == {
        "rename": (0, 0),
        "renameat": (0, 0),
        "unlinkat": (0, 0),
        "unlink": (0, 0),
        "rmdir": (0, 0),
        "missing_outside": (-1, 2),  # ENOENT, as without the filter, and nothing reported
    }
    assert reported == [] and sorted(os.listdir(scratch)) == []


def test_deletions_and_renames_outside_scratch_are_refused_and_named(tmp_path):
    scratch, outside = tmp_path / "scratch", tmp_path / "outside"
    scratch.mkdir()
    outside.mkdir()
    victim = outside / "victim"
    victim.write_text("keep me")
    (scratch / "mine").write_text("x")
    (scratch / "door").symlink_to(outside)  # a link inside scratch to a folder outside it

    def calls(libc):
        fd = os.open(outside, os.O_RDONLY | os.O_DIRECTORY)
        return {
            "unlink": _call(libc.unlink, str(victim).encode()),
            "dotdot": _call(libc.unlink, f"{scratch}/../outside/victim".encode()),
            "through_link": _call(libc.unlink, str(scratch / "door" / "victim").encode()),
            "unlinkat_dirfd": _call(libc.unlinkat, fd, b"victim", 0),
            "rmdir_at": _call(libc.unlinkat, AT_FDCWD, str(outside).encode(), AT_REMOVEDIR),
            "rename_out_of": _call(libc.rename, str(victim).encode(), str(scratch / "taken").encode()),
            "rename_into": _call(libc.rename, str(scratch / "mine").encode(), str(outside / "planted").encode()),
            "raw_syscall": _call(libc.syscall, 263, AT_FDCWD, str(victim).encode(), 0),  # x86_64 unlinkat
        }

    results, reported = _locked_down(scratch, calls)
    if os.uname().machine != "x86_64":
        results.pop("raw_syscall")
    assert all(v == (-1, 13) for v in results.values()), results  # EACCES, what Landlock answers
    assert len(reported) == len(results) and {"unlink", "unlinkat", "rename"} <= set(reported), reported
    assert victim.read_text() == "keep me" and (scratch / "mine").exists() and not (outside / "planted").exists()


def test_the_spawn_profile_leaves_deletions_to_the_programs_it_runs(tmp_path):
    """Triton's GPU profile lets the worker run compilers; after exec they have no SIGSYS handler, so a trapped
    deletion (a compiler removing its temporary files) would kill them: deletions are not trapped there."""
    victim = tmp_path / "tmpfile"
    victim.write_text("x")
    code, _, _ = _child(lambda: (_run(["rm", str(victim)]), b""), str(tmp_path / "scratch"), spawn=True)
    assert code == 0 and not victim.exists()


def test_replacing_the_reporter_ends_the_process_but_asking_for_it_does_not():
    import signal

    def ask():
        old = ctypes.create_string_buffer(256)  # a struct sigaction, larger than needed
        return ctypes.CDLL(None, use_errno=True).sigaction(signal.SIGSYS, None, old)

    def replace():
        signal.signal(signal.SIGSYS, signal.SIG_IGN)
        return 0

    assert _child(lambda: (ask(), b""))[0] == 0
    assert _child(lambda: (replace(), b""))[0] == -signal.SIGSYS
    # under `spawn` a subprocess's child resets every handler before exec: that must not end it
    assert _child(lambda: (_run(["true"]), b""), spawn=True)[0] == 0


def _run(cmd: list[str]) -> int:
    import subprocess

    return subprocess.run(cmd, check=False).returncode
