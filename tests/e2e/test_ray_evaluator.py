"""The Ray evaluator against a real local Ray cluster (`ray start --head` on 127.0.0.1 with two CPUs:
two worker processes' worth; tests/support/ray_cluster.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kope.db.ports import free_port
from tests.e2e.test_bench_cli import one_error_line, write_suite
from tests.support.ray_cluster import RAY_ENV, start_cluster, stop_cluster

ROOT = Path(__file__).resolve().parents[1]
RELU = ROOT / "fixtures" / "tasks" / "tiny_relu.py"


@pytest.fixture(scope="module")
def ray_cluster():
    """A one-node cluster with 2 CPUs on 127.0.0.1 (tests/support/ray_cluster.py); yields its GCS address."""
    try:
        address, temp_dir = start_cluster(cpus=2)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield address
    finally:
        stop_cluster(temp_dir)


def ray_env(neo4j_server, tmp_path, address, **extra):
    return neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / "data"), RAY_ADDRESS=address, **RAY_ENV, **extra)


def differences(a, b, where="results"):
    """Where two JSON values differ in structure: the keys of every object, the kinds of values, the shape
    of list elements; not the numbers (timings differ run to run), and null matches anything (a value
    that was not measured). Lists of different lengths differ only where their lengths are part of the
    bench's structure (pairs, attempts), which the test checks itself."""
    if a is None or b is None:
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{where}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a if k not in LOOSE for d in differences(a[k], b[k], f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        return [d for x in a[:1] for y in b[:1] for d in differences(x, y, f"{where}[0]")]
    if isinstance(a, bool) or isinstance(b, bool) or isinstance(a, str) or isinstance(b, str):
        return [] if type(a) is type(b) else [f"{where}: {type(a).__name__} vs {type(b).__name__}"]
    return [] if isinstance(a, (int, float)) and isinstance(b, (int, float)) else [f"{where}: {a!r} vs {b!r}"]


LOOSE = {"overlapped_with"}  # which pairs happened to run at the same time


def comparable(pair):
    """What must agree between a local and a Ray pair: the attempts' statuses and case results."""
    return [
        (a.get("status"), a.get("error_kind"), a.get("cases_passed"), a.get("cases_total")) for a in pair["attempts"]
    ]


def test_a_three_operator_bench_over_ray_matches_a_local_bench(kope_cli, neo4j_server, tmp_path, ray_cluster):
    suite = write_suite(tmp_path / "suite", [("relu_a", 1), ("relu_b", 1), ("relu_c", 2)])
    common = ["bench", "--suite", str(suite), "--proposer", "offline", "--steps", "1", "--configs",
              "active,no-memory", "--cases", "0", "--no-final", "--json"]  # fmt: skip
    results = {}
    for evaluator in ("local", "ray"):
        out = tmp_path / evaluator
        proc = kope_cli(  # two pair processes: over Ray, their evaluations spread over the cluster's two CPUs
            *common, "--workers", "2", "--evaluator", evaluator, "--out", str(out),
            env=ray_env(neo4j_server, tmp_path, ray_cluster, KOPE_EVALUATOR_RAY_CPUS="1"), timeout=1500,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-4000:]
        results[evaluator] = json.loads((out / "results.json").read_text())
    local, ray = results["local"], results["ray"]
    assert ray["complete"] and local["complete"]
    assert ray["options"]["evaluator"] == "ray" and local["options"]["evaluator"] == "local"
    # structurally identical: the same keys everywhere, the same pairs, the same attempts per pair
    assert differences(ray, local) == []
    by_pair = {name: {(p["config"], p["operator"]): p for p in r["pairs"]} for name, r in results.items()}
    assert (
        set(by_pair["ray"])
        == set(by_pair["local"])
        == {(c, o) for c in ("active", "no-memory") for o in ("relu_a", "relu_b", "relu_c")}
    )
    for key, pair in by_pair["ray"].items():
        assert comparable(pair) == comparable(by_pair["local"][key]), key
        assert len(pair["attempts"]) == 1
    # evaluated on this machine's hardware, through the cluster
    assert ray["hardware"]["id"] == local["hardware"]["id"]


def test_the_harness_checks_run_on_the_node_and_cheats_are_caught_there(ray_cluster, monkeypatch):
    from kope.boundary import eval_options
    from kope.config import load_config
    from kope.evaluators import make_evaluator

    for name, value in RAY_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("RAY_ADDRESS", ray_cluster)
    monkeypatch.setenv("KOPE_SECRET_TOKEN", "must-not-reach-the-outcome")
    evaluator = make_evaluator(load_config(), "ray")
    try:
        assert evaluator.cpus == 2  # the smallest (only) node's CPUs: a timed evaluation has it to itself
        options = eval_options(target="cpu", timing=False)
        expect = {
            ROOT / "fixtures" / "sandbox" / "relu_honest.py": "correct",
            ROOT / "adversarial" / "alias_input.py": "cheat_detected:output_aliases_input",
            ROOT / "adversarial" / "background_spinner.py": "cheat_detected:forbidden_api",
        }
        for candidate, kind in expect.items():
            outcome = evaluator.evaluate(RELU, candidate, options)
            assert (outcome.error_kind or outcome.status.value) == kind, (candidate.name, outcome.error_excerpt)
            assert "must-not-reach-the-outcome" not in json.dumps(outcome.to_dict())
    finally:
        evaluator.close()


def test_no_cluster_at_the_address_is_one_error_line(kope_cli, neo4j_server, tmp_path):
    closed = free_port()  # nothing listens there
    proc = kope_cli(
        "optimize", "relu", "--steps", "1", "--evaluator", "ray",
        env=neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / "data"), RAY_ADDRESS=f"127.0.0.1:{closed}", **RAY_ENV),
        timeout=300,
    )  # fmt: skip
    ok, errors = one_error_line(proc)
    assert ok, proc.stderr[-3000:]
    assert "no Ray cluster answers at 127.0.0.1:" in errors[0]
