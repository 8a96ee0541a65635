"""`--evaluator replay:DIR` end to end: the real CLI, loop, offline proposer, memory and Neo4j; the outcomes
come from the spaces committed in tests/fixtures/spaces (recorded once with the real harness, `--cases 0`).

Replayed outcomes must be the recorded ones, marked replayed in the graph and in the lineage report; a
proposal outside the space is refused with one error line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kope.evaluators.space import SpaceFile, read_spaces

pytestmark = pytest.mark.slow
SPACES = Path(__file__).resolve().parents[1] / "fixtures" / "spaces"
CASES = "0"  # the recorded case selection


def spaces() -> dict[str, SpaceFile]:
    return {f.operator: f for f in read_spaces(SPACES)}


def kope(kope_cli, neo4j_server, tmp_path, namespace: str, *args: str):
    env = neo4j_server.env(KOPE_NAMESPACE=namespace, KOPE_DATA_DIR=str(tmp_path / "data"))
    return kope_cli(*args, env=env, timeout=900)


def optimize(kope_cli, neo4j_server, tmp_path, namespace: str, *args: str) -> list[dict[str, Any]]:
    proc = kope(
        kope_cli, neo4j_server, tmp_path, namespace,
        "optimize", *args, "--proposer", "offline", "--cases", CASES, "--evaluator", f"replay:{SPACES}",
        "--out", str(tmp_path / "out" / namespace), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    return json.loads(proc.stdout)


def graph_outcomes(graph_client, namespace: str) -> list[dict[str, Any]]:
    records, _, _ = graph_client._driver.execute_query(
        "MATCH (d:Decision {ns: $ns})-[:PRODUCED]->(o:Outcome) "
        "RETURN d.operator AS operator, d.step AS step, d.run_id AS run_id, d.params_json AS params, "
        "o.replayed AS replayed, o.status AS status, o.speedup AS speedup, o.cases_passed AS passed, "
        "o.cases_total AS total, o.duration_s AS duration_s, o.cases_json AS cases ORDER BY operator, step",
        {"ns": namespace},
        database_=graph_client.database,
    )
    return [dict(r) for r in records]


def assert_recorded(rows: list[dict[str, Any]]) -> None:
    """Every outcome in the graph is marked replayed and is the one recorded for its setting."""
    recorded = spaces()
    assert rows
    for row in rows:
        assert row["replayed"] is True, row
        params = json.loads(row["params"])
        space = recorded[row["operator"]]
        assert params["template"] == space.template
        entry = space.entry(params["settings"])
        assert entry is not None, params["settings"]
        want = entry["outcome"]
        assert (row["status"], row["speedup"], row["passed"], row["total"], row["duration_s"]) == (
            want["status"], want["speedup"], want["cases_passed"], want["cases_total"], want["duration_s"],
        )  # fmt: skip
        cases = json.loads(row["cases"])
        assert [(c["name"], c["passed"], c["speedup"]) for c in cases] == [
            (c["name"], c["passed"], c["speedup"]) for c in want["cases"]
        ]
        assert [c["cand_ms"] for c in cases] == [
            c["cand_ms"]["median"] if c["cand_ms"] else None for c in want["cases"]
        ]


def test_optimize_on_recorded_spaces_records_the_recorded_outcomes_marked_replayed(
    kope_cli, neo4j_server, graph_client, tmp_path
):
    operators = sorted(spaces())
    summaries = optimize(
        kope_cli, neo4j_server, tmp_path, "replay-e2e",
        "--suite", "builtin", "--family", "elementwise", "--limit", str(len(operators)), "--steps", "4",
    )  # fmt: skip
    assert [s["operator"] for s in summaries] == operators
    # every run takes its 4 steps, or ends as converged (elu: after math=poly, 15.9x, every other recorded
    # setting is predicted >= 3x slower)
    assert all(len(s["steps"]) == 4 or s["stop_reason"].startswith("converged:") for s in summaries), [
        s["stop_reason"] for s in summaries
    ]
    rows = graph_outcomes(graph_client, "replay-e2e")
    assert len(rows) == sum(len(s["steps"]) for s in summaries) >= 2 * len(operators)
    assert_recorded(rows)
    # the runs are filed under the recorded machine
    records, _, _ = graph_client._driver.execute_query(
        "MATCH (r:Run {ns: $ns}) RETURN DISTINCT r.hw_id AS hw", {"ns": "replay-e2e"}, database_=graph_client.database
    )
    assert {r["hw"] for r in records} == {f.hardware.id for f in spaces().values()}

    page = tmp_path / "lineage.html"
    proc = kope(kope_cli, neo4j_server, tmp_path, "replay-e2e", "memory", "report", "-o", str(page))
    assert proc.returncode == 0, proc.stderr
    assert page.read_text().count("<th>replayed</th>") == len(rows)


def test_a_proposal_outside_the_recorded_space_is_refused_with_one_error(kope_cli, neo4j_server, tmp_path):
    outside = kope(
        kope_cli, neo4j_server, tmp_path, "replay-e2e-refused",
        "optimize", "sigmoid", "--proposer", "offline", "--cases", CASES, "--steps", "1",
        "--evaluator", f"replay:{SPACES}", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert outside.returncode == 2, outside.stderr
    errors = [line for line in outside.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "no recorded space for sigmoid on cpu" in errors[0], outside.stderr
    assert "Traceback" not in outside.stderr

    operator = sorted(spaces())[0]
    other_cases = kope(
        kope_cli, neo4j_server, tmp_path, "replay-e2e-refused",
        "optimize", operator, "--proposer", "offline", "--cases", "1", "--steps", "1",
        "--evaluator", f"replay:{SPACES}", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert other_cases.returncode == 2, other_cases.stderr
    errors = [line for line in other_cases.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "the run evaluates cases" in errors[0], other_cases.stderr
    assert "the run is kept" not in other_cases.stderr  # refused before a run was started


def test_the_bench_runs_on_recorded_spaces_without_a_final_evaluation(kope_cli, neo4j_server, graph_client, tmp_path):
    operators = sorted(spaces())
    out = tmp_path / "bench"
    proc = kope(
        kope_cli, neo4j_server, tmp_path, "unused",
        "bench", "--suite", "builtin", "--family", "elementwise", "--limit", str(len(operators)), "--cases", CASES,
        "--steps", "3", "--configs", "active,no-memory", "--evaluator", f"replay:{SPACES}", "--out", str(out),
        "--name", "replay-e2e",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "replay: no final evaluation" in proc.stderr
    results = json.loads((out / "results.json").read_text())
    pairs = results["pairs"]
    assert sorted({p["operator"] for p in pairs}) == operators and len(pairs) == 2 * len(operators)
    assert all(p["final"] is None for p in pairs)
    # 3 steps each, or fewer when the run ended as converged (elu after math=poly)
    assert all(len(p["attempts"]) == 3 or (p["stop_reason"] or "").startswith("converged:") for p in pairs), [
        (p["operator"], p["stop_reason"]) for p in pairs
    ]
    for config in ("active", "no-memory"):
        assert_recorded(graph_outcomes(graph_client, f"bench-replay-e2e-{config}"))


TRITON_SPACES = Path(__file__).resolve().parents[1] / "fixtures" / "spaces-triton"


def test_a_bench_replays_triton_spaces_here_and_leaves_out_what_no_triton_template_computes(
    kope_cli, neo4j_server, graph_client, tmp_path
):
    """The GPU learning path without a GPU (scripts/gpu_record_spaces.sh records on one): a Triton space, here
    layer_norm's recorded under TRITON_INTERPRET=1 (correct, no timings), replayed by the bench on the triton target
    on this CPU machine. Normalization's four channel norms have no Triton template: left out with a note each (the
    bench failed on batch_norm before), and --limit 1 is the first operator kept."""
    recorded = read_spaces(TRITON_SPACES)[0]
    out = tmp_path / "bench"
    proc = kope(
        kope_cli, neo4j_server, tmp_path, "unused",
        "bench", "--suite", "builtin", "--target", "triton", "--family", "normalization", "--limit", "1",
        "--cases", "4", "--steps", "3", "--configs", "active,no-memory", "--evaluator", f"replay:{TRITON_SPACES}",
        "--out", str(out), "--name", "replay-triton",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    left_out = [
        line for line in proc.stderr.splitlines() if "left out: no kernel template computes it on triton" in line
    ]
    assert len(left_out) == 4 and "batch_norm" in left_out[0], proc.stderr[-3000:]
    pairs = json.loads((out / "results.json").read_text())["pairs"]
    assert {p["operator"] for p in pairs} == {"layer_norm"} and len(pairs) == 2
    assert all(len(p["attempts"]) == 3 and all(a["status"] == "correct" for a in p["attempts"]) for p in pairs)
    for config in ("active", "no-memory"):
        rows = graph_outcomes(graph_client, f"bench-replay-triton-{config}")
        assert len(rows) == 3 and all(r["replayed"] is True and r["status"] == "correct" for r in rows), rows
        for row in rows:
            params = json.loads(row["params"])
            assert params["template"] == "row_norm" and recorded.entry(params["settings"]) is not None, params


def steps_to_optimum(summary: dict[str, Any], optimum: float) -> int | None:
    """The first step (counted from 1) whose replayed speedup is the space's optimum (None: never)."""
    return next((s["step"] + 1 for s in summary["steps"] if s["speedup"] == optimum), None)


def test_with_memory_later_operators_reach_the_recorded_optimum_in_no_more_steps(kope_cli, neo4j_server, tmp_path):
    """The learning regression test: fixed seeds, the committed spaces; a proposer change that makes memory
    slower than no memory to the optimum of the 2nd or 3rd operator fails here."""
    recorded = spaces()
    operators = sorted(recorded)
    steps = str(max(len(f.settings) for f in recorded.values()))  # enough to try every recorded setting
    common = ("--suite", "builtin", "--family", "elementwise", "--limit", str(len(operators)), "--steps", steps)
    results = {}
    for label, extra in (("memory", ()), ("no-memory", ("--no-memory",))):
        summaries = optimize(kope_cli, neo4j_server, tmp_path, f"replay-learn-{label}", *common, *extra)
        results[label] = {
            s["operator"]: steps_to_optimum(s, recorded[s["operator"]].optimum() or 0.0) for s in summaries
        }
    print(f"steps to the recorded optimum: {results}")  # the figures docs/bench.md quotes (pytest -s)
    later = operators[1:]
    assert all(results["no-memory"][op] is not None for op in operators), results  # every space is exhausted
    # every later operator reaches its optimum with memory too; one seed does not say which configuration gets
    # there first on a single operator (since the defaults are measured first, clamp takes 9 steps with memory
    # against 8 without at seed 0, and 3.50 against 8.45 over 20 repeats of the bench): the per-family comparison
    # over seeds is test_learning_regression_memory_does_not_lose_to_no_memory_on_reduction's
    assert all(results["memory"][op] is not None for op in later), results
    # clearly better overall, and on elu, whose best knob (math: only the transcendental operators use it) no
    # earlier operator measured: the optimistic prior for an unmeasured knob value tries math=poly early
    # (before it, both configurations tried it last, at step 10 of 10)
    assert sum(results["memory"][op] or 0 for op in later) < sum(results["no-memory"][op] or 0 for op in later)
    assert (results["memory"]["elu"] or 99) <= 3, results


BENCH_SPACES = Path(__file__).resolve().parents[2] / "benchmarks" / "spaces"


def test_learning_regression_memory_does_not_lose_to_no_memory_on_reduction(kope_cli, neo4j_server, tmp_path):
    """Issue 34's learning regression test: the real bench on the recorded reduction spaces (argmax_dim, cumsum,
    logsumexp, max_dim: benchmarks/spaces), 6 repeats with fixed proposer seeds 0-5, 8 steps. max_dim is the
    operator memory can help or hurt: argmax_dim, the same template, is its memory (its best, prefetch=on, 14.2x,
    is 2.05x on max_dim, below max_dim's defaults); cumsum and logsumexp use other templates, so both configurations
    take the same steps there. The tuner of issue 34's third round (main at 44bfcf7) took 12 % more steps with
    memory over these repeats (max_dim 7.0 vs 4.7 steps); memory must not lose to no memory by more than 5 %."""
    out = tmp_path / "bench"
    proc = kope(
        kope_cli, neo4j_server, tmp_path, "unused",
        "bench", "--suite", "builtin", "--family", "reduction", "--limit", "4", "--cases", CASES, "--steps", "8",
        "--configs", "active,no-memory", "--repeats", "6", "--evaluator", f"replay:{BENCH_SPACES}", "--out", str(out),
        "--name", "replay-learn-reduction",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    repeats = [r["family_steps"]["reduction"] for r in results["repeat_summary"]["per_repeat"]]
    memory, alone = sum(r["active"] for r in repeats), sum(r["no-memory"] for r in repeats)
    print(f"steps to 90% per repeat (memory, no memory): {[(r['active'], r['no-memory']) for r in repeats]}")
    assert len(repeats) == 6
    assert memory <= 1.05 * alone, (memory / alone, repeats)


def test_a_replay_with_memory_is_reproducible_after_a_harness_cache_miss_and_hit(kope_cli, neo4j_server, tmp_path):
    """The same replayed runs with memory, twice (fresh namespaces, one fresh harness cache): the first loads the
    tasks into the harness cache, the second reads them from it. A case's shape is its integers in the order the
    task wrote them, and the cache used to store the case parameters as a dict written with sorted keys, so
    tall_skinny_matmul's case (m, k, n) became (k, m, n) on a cache hit: the cost model, which reads shapes when
    memory holds another operator's records, then predicted differently (here from tall_skinny_matmul's step 5
    on), and the same replay bench gave other per-operator steps run to run (issue 34, sixth round)."""
    cache = tmp_path / "harness-cache"
    runs = []
    for label in ("miss", "hit"):
        namespace = f"replay-repro-{label}"
        env = neo4j_server.env(
            KOPE_NAMESPACE=namespace, KOPE_DATA_DIR=str(tmp_path / "data"), KOPE_HARNESS_CACHE=str(cache)
        )
        steps = []
        for operator, budget in (("batched_matmul", "8"), ("tall_skinny_matmul", "6")):
            proc = kope_cli(
                "optimize", operator, "--proposer", "offline", "--cases", CASES, "--steps", budget,
                "--evaluator", f"replay:{BENCH_SPACES}", "--out", str(tmp_path / "out" / namespace), "--json",
                env=env, timeout=600,
            )  # fmt: skip
            assert proc.returncode == 0, proc.stderr[-3000:]
            summary = json.loads(proc.stdout)
            summary = summary[0] if isinstance(summary, list) else summary
            steps.append([(operator, s["title"], s["speedup"], s["model"]) for s in summary["steps"]])
        runs.append(steps)
    miss, hit = runs
    assert len(miss[1]) == 6 and any(step[3].get("memory_records") for step in miss[1])  # memory was used
    assert miss == hit


def test_the_simulation_takes_the_benchs_steps_setting_by_setting(kope_cli, neo4j_server, tmp_path, monkeypatch):
    """benchmarks/sim_replay.py stands in for the replay bench while the proposer is developed (minutes instead of
    half an hour): it must propose what the bench proposes. The cost model's fit depends on the order of its rows,
    and the simulation passed memory in step order where the bench's retrieval returns this run's attempts first,
    then by shape and newest first: linear's step 3 on spaces-r2 was another setting (seed 0), and the bench and
    the simulation moved matmul in opposite directions for one tuner change (issue 34, nineteenth round). Here every
    step of three gemm operators, two seeds, both configurations, must replay the same recorded outcome (the
    speedups, to 9 digits, name the setting: no two correct settings of these spaces share one)."""
    root = Path(__file__).resolve().parents[2]
    monkeypatch.syspath_prepend(str(root / "benchmarks"))
    import sim_replay

    folder = root / "benchmarks" / "spaces-r2"
    out = tmp_path / "bench"
    proc = kope(
        kope_cli, neo4j_server, tmp_path, "unused",
        "bench", "--suite", "builtin", "--family", "matmul", "--limit", "3", "--cases", CASES, "--steps", "8",
        "--configs", "active,no-memory", "--repeats", "2", "--evaluator", f"replay:{folder}", "--out", str(out),
        "--name", "replay-sim-fidelity", "--no-final",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())
    bench = {
        (p["config"], p["repeat"], p["operator"]): [round(a["speedup"] or 0.0, 9) for a in p["attempts"]]
        for p in results["pairs"]
    }
    order = ("batched_matmul", "linear", "matmul")
    family = sorted((s for s in read_spaces(folder) if s.operator in order), key=lambda s: order.index(s.operator))
    simulated = {}
    for repeat in (1, 2):  # the bench's repeat k runs the proposer with seed k - 1
        for config in ("active", "no-memory"):
            for row in sim_replay.run_family(family, 8, repeat - 1, config == "active"):
                simulated[(config, repeat, row["operator"])] = [round(a or 0.0, 9) for a, _, _ in row["trajectory"]]
    assert set(bench) == set(simulated)
    for key in sorted(bench):
        assert simulated[key] == bench[key], key
