"""A real evaluation worker process (`python -m harness serve`): the same outcomes as a local evaluation, cheats
caught on the worker, a worker killed mid-evaluation retried elsewhere (never the candidate's failure), a wrong key."""

from __future__ import annotations

import ast
import json
import threading
import time
from pathlib import Path

import httpx
import pytest

from harness.evaluate import EvalOptions, evaluate
from harness.suite import find_candidate, find_task, list_candidates
from harness.timing import Budget
from kope.errors import EvaluatorAuthError, InfrastructureError
from kope.evaluators import parse_evaluator
from kope.evaluators.http import HttpEvaluator
from tests.support.eval_worker import KEY, EvalWorker

ROOT = Path(__file__).resolve().parents[1]
CHEATS = sorted((ROOT / "adversarial").glob("*.py"))
BUILTIN = sorted(list_candidates("cpu").items())


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    started = EvalWorker(tmp_path_factory.mktemp("worker")).start()
    yield started
    started.stop()


def http_evaluator(*urls: str, key: str = KEY, attempts: int = 3) -> HttpEvaluator:
    return HttpEvaluator(parse_evaluator(",".join(urls)), key, timeout_s=900, attempts=attempts)


def summary(outcome) -> dict:
    """What must be the same locally and on the worker (timings differ; hardware is this host's either way)."""
    return {
        "status": outcome.status.value,
        "error_kind": outcome.error_kind,
        "cases": [(c.name, c.passed) for c in outcome.cases],
        "cases_passed": outcome.cases_passed,
        "hardware": outcome.hardware.id,
    }


def constants(path: Path) -> dict:
    values = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return values


@pytest.mark.slow
@pytest.mark.parametrize("operator, path", BUILTIN, ids=[op for op, _ in BUILTIN])
def test_a_builtin_candidate_has_the_same_outcome_on_the_worker_as_locally(worker, operator, path):
    options = EvalOptions(timing=False, seeds=1)
    task = find_task(operator).path
    local = evaluate(task, path, options)
    with http_evaluator(worker.url) as remote:
        assert summary(remote.evaluate(task, path, options)) == summary(local)
    assert local.status.value == "correct"


@pytest.mark.slow
@pytest.mark.parametrize("path", CHEATS, ids=lambda p: p.stem)
def test_a_cheat_is_caught_on_the_worker_as_locally(worker, path):
    spec = constants(path)
    task = ROOT / "fixtures" / "tasks" / f"{spec['TASK']}.py"
    options = EvalOptions(timing=bool(spec.get("NEEDS_TIMING")), budget=Budget(warmup_ms=5, rep_ms=20))
    local = evaluate(task, path, options)
    with http_evaluator(worker.url) as remote:
        outcome = remote.evaluate(task, path, options)
    assert summary(outcome) == summary(local)
    assert outcome.status.value in ("cheat_detected", "incorrect") and outcome.error_excerpt


def test_a_wrong_key_is_refused_with_401_and_a_clear_error(worker):
    assert httpx.get(worker.url + "/health", headers={"Authorization": "Bearer not-the-key"}).status_code == 401
    assert httpx.get(worker.url + "/health").status_code == 401
    with http_evaluator(worker.url, key="not-the-key-either") as wrong, pytest.raises(EvaluatorAuthError) as info:
        wrong.hardware("cpu")
    assert "401" in info.value.message and "not-the-key" not in info.value.message


def test_kope_optimize_with_a_wrong_key_prints_one_error_line(worker, kope_cli, neo4j_server, tmp_path):
    env = neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / "data"), KOPE_WORKER_KEY="wrong-key-wrong-key")
    proc = kope_cli("optimize", "relu", "--proposer", "offline", "--steps", "1", "--evaluator", worker.url, env=env)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode != 0 and len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "401" in errors[0] and "wrong-key-wrong-key" not in proc.stderr


@pytest.mark.slow
def test_kope_optimize_over_the_worker_gives_the_same_steps_as_locally(worker, kope_cli, neo4j_server, tmp_path):
    def run(namespace: str, *extra: str) -> dict:
        env = neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / namespace), KOPE_NAMESPACE=namespace, KOPE_WORKER_KEY=KEY)
        proc = kope_cli(
            "optimize", "relu", "--proposer", "offline", "--steps", "2", "--cases", "0", "--out",
            str(tmp_path / namespace / "out"), "--json", *extra, env=env, timeout=900,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout)[0]

    local = run("worker-e2e-local")
    remote = run("worker-e2e-remote", "--evaluator", worker.url)
    steps = [[(s["step"], s["title"], s["status"], s["error_kind"]) for s in r["steps"]] for r in (local, remote)]
    assert steps[0] == steps[1] and len(steps[0]) == 2
    assert remote["status"] == local["status"]


def test_a_worker_killed_mid_evaluation_is_retried_on_another_never_lost_nor_the_candidates_failure(tmp_path):
    a = EvalWorker(tmp_path / "a").start()
    b = EvalWorker(tmp_path / "b").start()
    task, candidate = find_task("relu").path, tmp_path / "slow_relu.py"
    source = find_candidate("relu").read_text()  # the built-in candidate, 3 s slower per forward (time.sleep)
    candidate.write_text("import time\n" + source.replace(
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n",
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        time.sleep(3)\n",
    ))  # fmt: skip
    options = EvalOptions(timing=False, seeds=1)
    result: dict = {}
    try:
        with http_evaluator(a.url, b.url) as remote:

            def run() -> None:
                try:
                    result["outcome"] = remote.evaluate(task, candidate, options)
                except Exception as exc:  # reported by the assertions below
                    result["error"] = exc

            thread = threading.Thread(target=run)
            thread.start()
            deadline = time.monotonic() + 300
            victim = None
            while victim is None and time.monotonic() < deadline and thread.is_alive():
                victim = next((w for w in (a, b) if w.health()["running"] > 0), None)
                time.sleep(0.2)
            assert victim is not None, f"the evaluation never started on a worker: {result}"
            victim.kill()
            thread.join(600)
            survivor = b if victim is a else a
            assert "error" not in result, result
            assert result["outcome"].status.value == "correct"  # done on the other worker
            assert survivor.health()["devices"][0]["evaluations"] == 1
            survivor.kill()  # now nothing is left: an infrastructure error, not an outcome
            with pytest.raises(InfrastructureError) as info:
                remote.evaluate(task, candidate, options)
            assert info.value.kind.startswith("infrastructure:")
    finally:
        a.stop()
        b.stop()


def test_a_request_over_the_size_limit_is_413_and_a_malformed_one_422(worker):
    headers = {"Authorization": f"Bearer {KEY}"}
    big = httpx.post(worker.url + "/evaluate", content=b"x" * (17 << 20), headers=headers, timeout=60)
    assert big.status_code == 413
    bad = httpx.post(worker.url + "/evaluate", json={"schema": "kope.eval-request/1"}, headers=headers, timeout=60)
    assert bad.status_code == 422 and "bad evaluation request" in bad.json()["error"]["message"]


def test_a_deeply_nested_body_is_422_not_500(worker):
    """Issue 33, item 6: json.loads raised RecursionError, which the worker answered with 500."""
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    deep = httpx.post(worker.url + "/evaluate", content=b"[" * 200_000 + b"]" * 200_000, headers=headers, timeout=60)
    assert deep.status_code == 422 and "bad request" in deep.json()["error"]["message"]
    assert httpx.get(worker.url + "/health", headers=headers, timeout=60).status_code == 200  # still serving


def test_a_huge_case_range_is_refused_before_it_is_expanded(worker):
    """Issue 33, item 6: cases "0-20000000" built a list of 20 million indices (~760 MB) before it was refused."""
    from harness.evaluate import EvalOptions
    from harness.remote import request_for

    task, candidate = (
        ROOT / "fixtures" / "tasks" / "tiny_relu.py",
        ROOT / "fixtures" / "honest" / "tiny_relu_carries_task.py",
    )
    request = request_for(task, candidate, EvalOptions(cases="0-20000000", timing=False))
    headers = {"Authorization": f"Bearer {KEY}"}
    reply = httpx.post(worker.url + "/evaluate", json=request.to_payload(), headers=headers, timeout=120)
    assert reply.status_code == 422, reply.text
    assert "case range 0-20000000 is out of range" in reply.json()["error"]["message"]


def test_health_shows_the_queue_the_devices_and_the_hardware(worker):
    health = worker.health()
    assert health["status"] == "ok" and health["queue_depth"] == 0 and "cpu" in health["targets"]
    assert health["hardware"]["cpu"]["id"].startswith("cpu-") and health["devices"][0]["name"] == "cpu"


def test_a_bad_evaluator_value_is_one_error_line(kope_cli):
    proc = kope_cli("optimize", "relu", "--evaluator", "gpu-box")
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode != 0 and len(errors) == 1 and "unknown evaluator" in errors[0], proc.stderr
