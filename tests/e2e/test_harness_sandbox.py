"""Canaries: what a candidate tries from inside its worker, and what the machine looks like afterwards.

Each test writes a small candidate that attempts one escape at import time (before the
harness's Python-level guards are armed, so only the OS sandbox stands in the way) and then
behaves honestly - or returns a wrong answer if the escape worked - and checks the outcome
and the state outside the worker.
"""

from __future__ import annotations

import os
import socket
import textwrap
import threading
import time
from pathlib import Path

import pytest

from harness.errors import SandboxUnavailableError
from harness.evaluate import EvalOptions, evaluate
from harness.sandbox import sandbox_status
from harness.worker_pool import close_pools
from tests.support.processes import descendants

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "fixtures" / "tasks" / "tiny_relu.py"
OPTIONS = EvalOptions(timing=False, seeds=1, case_timeout_s=60, static_checks=False)  # only the OS sandbox in the way

HONEST = """
import torch
import torch.nn as nn
from harness.cpu import compile_cpp

_lib = compile_cpp(r'''
#include <cstdint>
extern "C" void relu_f32(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f; }
extern "C" void relu_f64(const double* x, double* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0 ? x[i] : 0.0; }
''')


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        if ESCAPED:
            return y.zero_()
        (_lib.relu_f32 if x.dtype == torch.float32 else _lib.relu_f64)(x.contiguous(), y, x.numel())
        return y
"""

pytestmark = pytest.mark.skipif(not sandbox_status().available, reason="no OS sandbox on this machine")


def candidate(tmp_path: Path, attempt: str, name: str = "cand.py") -> Path:
    """A candidate that runs ``attempt`` (which sets ESCAPED) at import, then computes ReLU (wrongly if ESCAPED)."""
    path = tmp_path / name
    body = "ESCAPED = False\n" + textwrap.dedent(attempt) + HONEST
    path.write_text(body)
    return path


def pooled_pids() -> set[int]:
    """Processes of the workers still open on purpose: idle, booting or loaded reference workers."""
    from harness.worker_pool import live_workers
    from tests.support.processes import zygote_processes

    pids = zygote_processes()  # the zygote itself (a worker it forked is not hidden by this: see below)
    for w in live_workers():
        assert w.role != "candidate", "a candidate worker outlived its evaluation"
        pids |= {w.proc.pid} | descendants(w.proc.pid)
    return pids


def test_a_candidate_cannot_create_a_process(tmp_path):
    path = candidate(
        tmp_path,
        """
        import os
        try:
            if os.fork() == 0:
                os._exit(0)
            ESCAPED = True
        except OSError:
            pass
        """,
    )
    outcome = evaluate(TASK, path, OPTIONS)
    assert outcome.error_kind == "cheat_detected:process_spawn", outcome.error_excerpt
    assert "seccomp" in outcome.error_excerpt


def test_a_candidate_cannot_write_or_delete_outside_its_scratch_folder(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    path = candidate(
        tmp_path,
        f"""
        import os
        for action in (lambda: os.remove({str(victim)!r}), lambda: open({str(tmp_path / "new.txt")!r}, "w").write("x")):
            try:
                action()
                ESCAPED = True
            except OSError:
                pass
        """,
    )
    outcome = evaluate(TASK, path, OPTIONS)
    # blocked, and since issue 33 (item 5) flagged too: a blocked deletion was `correct` before
    assert outcome.error_kind == "cheat_detected:file_access", outcome.error_excerpt
    assert victim.read_text() == "keep me" and not (tmp_path / "new.txt").exists()


NATIVE_FILES = r"""
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
extern "C" int64_t delete_natively(int64_t path) { return unlink(reinterpret_cast<const char*>(path)); }
extern "C" int64_t scratch_work(void) {  // what an honest kernel may do in its own temporary folder
    const char* tmp = getenv("TMPDIR");
    if (!tmp) return -1;
    std::string a = std::string(tmp) + "/a", b = a + "2", d = a + "dir";
    FILE* f = fopen(a.c_str(), "w");
    if (!f) return -2;
    fclose(f);
    if (rename(a.c_str(), b.c_str()) || unlink(b.c_str()) || mkdir(d.c_str(), 0700) || rmdir(d.c_str())) return -3;
    return 0;
}
"""


def _c_string(text: str) -> str:
    return f"torch.tensor(list({text!r}.encode()) + [0], dtype=torch.uint8)"


def test_a_native_deletion_outside_scratch_is_refused_and_named(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    path = candidate(
        tmp_path,
        f"""
        import torch
        from harness.cpu import compile_cpp
        _path = {_c_string(str(victim))}
        ESCAPED = compile_cpp({NATIVE_FILES!r}).delete_natively(_path.data_ptr()) == 0
        """,
    )
    outcome = evaluate(TASK, path, OPTIONS)
    # blocked before issue 33 too (Landlock) but came back `correct`: C++ is not seen by the audit hook
    assert outcome.error_kind == "cheat_detected:file_access", outcome.error_excerpt
    assert "unlink" in outcome.error_excerpt and "seccomp" in outcome.error_excerpt
    assert victim.read_text() == "keep me"


def test_native_deletions_and_renames_in_its_own_scratch_are_accepted(tmp_path):
    path = candidate(
        tmp_path,
        f"""
        from harness.cpu import compile_cpp
        ESCAPED = compile_cpp({NATIVE_FILES!r}).scratch_work() != 0
        """,
    )
    outcome = evaluate(TASK, path, OPTIONS)
    assert outcome.status.value == "correct", outcome.error_excerpt


def test_a_candidate_cannot_reach_the_network(tmp_path):
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted = []

    def accept():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                accepted.append(server.accept())
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    path = candidate(
        tmp_path,
        f"""
        import socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
            ESCAPED = True
        except OSError:
            pass
        """,
    )
    outcome = evaluate(TASK, path, OPTIONS)
    server.close()
    assert accepted == []
    assert outcome.error_kind == "cheat_detected:network_access", outcome.error_excerpt


def test_nothing_a_candidate_starts_outlives_its_evaluation(tmp_path):
    path = candidate(
        tmp_path,
        """
        import threading, time
        threading.Thread(target=time.sleep, args=(120,), daemon=True).start()
        """,
    )
    before = descendants(os.getpid())
    outcome = evaluate(TASK, path, OPTIONS)
    assert outcome.status.value == "correct", outcome.error_excerpt
    time.sleep(0.5)
    left = descendants(os.getpid()) - before - pooled_pids()
    assert left == set()


def test_a_candidate_cannot_read_kope_variables_and_they_never_reach_the_outcome(tmp_path, monkeypatch):
    secret = "sk-kope-canary-0123456789"
    monkeypatch.setenv("KOPE_LLM_API_KEY", secret)
    close_pools()  # warm workers started before the variable was set would prove nothing
    path = candidate(
        tmp_path,
        """
        import os
        print("ENV:", sorted(os.environ))
        ESCAPED = any(k.startswith("KOPE_") for k in os.environ)
        raise RuntimeError("show me the output: " + repr(dict(os.environ)))
        """,
    )
    outcome = evaluate(TASK, path, OPTIONS)
    assert outcome.status.value == "runtime_error" and "ENV:" in outcome.error_excerpt
    assert secret not in outcome.to_json() and "KOPE_" not in outcome.error_excerpt


def test_a_candidate_cannot_read_another_processs_memory(tmp_path):
    path = candidate(
        tmp_path,
        f"""
        try:
            with open("/proc/{os.getpid()}/mem", "rb") as f:
                f.read(1)
            ESCAPED = True
        except OSError:
            pass
        """,
    )
    outcome = evaluate(TASK, path, OPTIONS)
    assert outcome.status.value == "correct", outcome.error_excerpt  # the parent is not even visible


def test_a_candidate_cannot_patch_the_harnesss_worker_code():
    task = ROOT / "fixtures" / "tasks" / "tiny_softmax.py"
    outcome = evaluate(task, ROOT / "adversarial" / "patch_worker_class.py", OPTIONS)
    assert outcome.error_kind == "cheat_detected:monkey_patch", outcome.error_excerpt
    assert "CandidateWorker.run was replaced" in outcome.error_excerpt
    # a patch the worker cannot see (its replies rewritten on the way out): the parent's count check
    outcome = evaluate(task, ROOT / "adversarial" / "patch_worker_reply.py", OPTIONS)
    assert outcome.error_kind == "cheat_detected:missing_trials", outcome.error_excerpt


def test_a_candidate_cannot_change_a_later_evaluations_result(tmp_path):
    from harness.commands import cache_root

    honest = candidate(tmp_path, "", "honest.py")
    assert evaluate(TASK, honest, OPTIONS).status.value == "correct"  # the cache now holds its kernel and references
    cache = cache_root()
    path = candidate(
        tmp_path,
        f"""
        import os
        for root, dirs, files in os.walk({str(cache)!r}):
            for name in files:
                try:
                    with open(os.path.join(root, name), "r+b") as f:
                        f.write(b"poison")
                except OSError:
                    pass
        """,
        "poisoner.py",
    )
    evaluate(TASK, path, OPTIONS)
    later = evaluate(TASK, honest, OPTIONS)
    assert later.status.value == "correct", later.error_excerpt


def test_a_candidate_cannot_read_the_compile_caches_signing_key(tmp_path):
    """Issue 33, 5 (the compile cache readable): the key that signs the compile cache's entries is in a folder the
    worker's view hides; a candidate that could read it could sign a poisoned entry for a later evaluation."""
    from harness.commands import cache_root
    from harness.cpu import library_key

    library_key()  # there is a key to read
    key = cache_root() / "keys" / "library-key"
    assert key.is_file()
    path = candidate(
        tmp_path,
        f"""
        import os
        try:
            with open({str(key)!r}, "rb") as f:
                ESCAPED = bool(f.read())
        except OSError:
            pass
        try:
            ESCAPED = ESCAPED or bool(os.listdir({str(key.parent)!r}))
        except OSError:
            pass
        """,
    )
    outcome = evaluate(TASK, path, OPTIONS)
    assert outcome.status.value == "correct", outcome.error_excerpt


def test_a_candidate_cannot_see_the_reference_cache(tmp_path):
    from harness.commands import cache_root

    honest = candidate(tmp_path, "", "honest.py")
    assert evaluate(TASK, honest, OPTIONS).status.value == "correct"
    refs = cache_root() / "refs"
    assert any(refs.rglob("*.kref"))  # there is something to see
    path = candidate(
        tmp_path,
        f"""
        import os
        try:
            ESCAPED = bool(os.listdir({str(refs)!r}))
        except OSError:
            pass
        """,
    )
    outcome = evaluate(TASK, path, OPTIONS)
    assert outcome.status.value == "correct", outcome.error_excerpt


def test_without_the_sandbox_candidates_are_refused_unless_the_user_opts_out(tmp_path, monkeypatch):
    import harness.sandbox as sb

    honest = candidate(tmp_path, "", "honest.py")
    monkeypatch.setattr(sb, "sandbox_status", lambda: sb.SandboxStatus(False, {"namespaces": "off"}, "namespaces: off"))
    with pytest.raises(SandboxUnavailableError, match="KOPE_HARNESS_SANDBOX=off"):
        evaluate(TASK, honest, OPTIONS)
    monkeypatch.setenv("KOPE_HARNESS_SANDBOX", "off")
    assert evaluate(TASK, honest, OPTIONS).status.value == "correct"
