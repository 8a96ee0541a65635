"""`kope optimize` end to end with a scripted OpenAI-compatible server, the real harness and Neo4j.

The `kope` process talks to the replay server over HTTP with the real openai
client; the graph is inspected afterwards with Cypher.
"""

from __future__ import annotations

import json

import pytest

from kope.memory import ExperienceGraph
from tests.support import kernels
from tests.support.hints import parse_hint
from tests.support.llm_replay import Fail, ReplayLLM, Reply

pytestmark = pytest.mark.slow
CASES = "0-1"  # two float32 relu cases keep each evaluation short


def env_for(neo4j_server, server, namespace, tmp_path, **extra):
    return neo4j_server.env(
        KOPE_LLM_BASE_URL=server.url,
        KOPE_LLM_MODEL="replay-model",
        KOPE_LLM_API_KEY="test-key",
        KOPE_NAMESPACE=namespace,
        KOPE_DATA_DIR=str(tmp_path / "data"),
        KOPE_LLM_TIMEOUT="30",
        **extra,
    )


def cypher(graph_client, query, **params):
    records, _, _ = graph_client._driver.execute_query(query, params, database_=graph_client.database)
    return [r.data() for r in records]


def test_scripted_run_records_every_step_branches_after_backtracking_and_counts_tokens(
    kope_cli, neo4j_server, graph_client, tmp_path
):
    script = [
        Reply(kernels.reply("serial baseline with a dependent chain", "algorithm", kernels.SLOW), 1000, 200),
        Reply(kernels.reply("OpenMP + SIMD", "parallelization", kernels.FAST), 1100, 210),
        Reply(kernels.reply("hand-written intrinsics", "instruction", kernels.BROKEN), 1200, 220),
        Fail(429, "rate limited", {"retry-after": "0"}),
        Reply(kernels.reply("drop the max (wrong on purpose)", "algorithm", kernels.WRONG), 1300, 230),
        Reply(kernels.reply("serial variant of the baseline", "scheduling", kernels.SLOW), 1400, 240),
        Reply("I think we should tile the loop, but here is no code.", 1500, 250),
    ]
    with ReplayLLM(script, api_key="test-key") as server:
        env = env_for(neo4j_server, server, "llm-e2e", tmp_path)
        proc = kope_cli(
            "optimize",
            "relu",
            "--proposer",
            "llm",
            "--steps",
            "6",
            "--patience",
            "2",
            "--cases",
            CASES,
            "--out",
            str(tmp_path / "out"),
            "--json",
            env=env,
            timeout=900,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert server.remaining == 0
        prompts = [r for r in server.requests if r.path.endswith("/chat/completions")]
    summary = json.loads(proc.stdout)[0]
    statuses = [s["status"] for s in summary["steps"]]
    assert statuses == ["correct", "correct", "compile_error", "incorrect", "correct", "format_error"]
    run_id = summary["run_id"]

    memory = ExperienceGraph(graph_client, namespace="llm-e2e")
    state = memory.run_state(run_id)
    ids = [d.id for d in state.decisions]
    assert ids == [f"{run_id}:s{i}" for i in range(6)]
    # one Outcome per Decision
    rows = cypher(
        graph_client,
        "MATCH (d:Decision {ns: $ns, run_id: $run})-[:PRODUCED]->(o:Outcome) RETURN d.id AS id, count(o) AS n",
        ns="llm-e2e",
        run=run_id,
    )
    assert sorted((r["id"], r["n"]) for r in rows) == [(i, 1) for i in ids]
    # NEXT keeps time order
    nxt = cypher(
        graph_client,
        "MATCH (a:Decision {ns: $ns, run_id: $run})-[:NEXT]->(b) RETURN a.id AS src, b.id AS dst, a.step AS step ORDER BY step",
        ns="llm-e2e",
        run=run_id,
    )
    assert [(r["src"], r["dst"]) for r in nxt] == list(zip(ids, ids[1:]))
    # FROM: s1 improves on s0, s2/s3 start from the incumbent s1, then the loop backtracks to s0: a branch
    parents = {d.id: d.parent_id for d in state.decisions}
    assert parents[ids[1]] == ids[0] and parents[ids[2]] == ids[1] and parents[ids[3]] == ids[1]
    assert parents[ids[4]] == ids[0], "after 2 non-improving steps the loop branches from the best earlier state"
    children_of_s0 = cypher(
        graph_client,
        "MATCH (c:Decision {ns: $ns})-[:FROM]->(p:Decision {ns: $ns, id: $id}) RETURN c.id AS id ORDER BY id",
        ns="llm-e2e",
        id=ids[0],
    )
    assert [r["id"] for r in children_of_s0] == [ids[1], ids[4]]
    # the incumbent is the fast kernel
    assert state.incumbent.id == ids[1] and summary["best_id"] == ids[1]
    assert (tmp_path / "out" / "relu" / run_id / "best.py").read_text() == kernels.FAST
    # USED edges: what was in each prompt (knowledge from step 0, this run's experience later)
    used = cypher(
        graph_client,
        "MATCH (d:Decision {ns: $ns, run_id: $run})-[u:USED]->(e) RETURN d.step AS step, labels(e)[0] AS kind, e.id AS id, u.tier AS tier",
        ns="llm-e2e",
        run=run_id,
    )
    assert {r["kind"] for r in used} >= {"Knowledge", "Decision"}
    assert any(r["kind"] == "Decision" and r["id"] == ids[1] and r["step"] >= 2 for r in used)
    # the prompt of step 3 carried the compile error of step 2 as latest feedback
    assert "compile_error" in prompts[4].text("user") and "this is not C++" in prompts[4].text("user")
    # token totals: the usage the server reported, summed per run
    assert state.run.prompt_tokens == 1000 + 1100 + 1200 + 1300 + 1400 + 1500
    assert state.run.completion_tokens == 200 + 210 + 220 + 230 + 240 + 250
    format_step = state.decisions[5]
    assert format_step.error_kind == "format_error:no_code"


def test_second_task_of_a_family_gets_the_first_tasks_experience(kope_cli, neo4j_server, graph_client, tmp_path):
    with ReplayLLM([Reply(kernels.reply("OpenMP + SIMD relu", "parallelization", kernels.FAST), 900, 100)]) as server:
        env = env_for(neo4j_server, server, "cross-task", tmp_path)
        first = kope_cli(
            "optimize",
            "relu",
            "--proposer",
            "llm",
            "--steps",
            "1",
            "--cases",
            CASES,
            "--json",
            "--out",
            str(tmp_path / "out"),
            env=env,
            timeout=600,
        )
        assert first.returncode == 0, first.stderr[-3000:]
    relu_decision = json.loads(first.stdout)[0]["steps"][0]["decision_id"]
    with ReplayLLM([Reply("no code this time", 900, 10)]) as server:
        env = env_for(neo4j_server, server, "cross-task", tmp_path)
        second = kope_cli(
            "optimize",
            "leaky_relu",
            "--proposer",
            "llm",
            "--steps",
            "1",
            "--json",
            "--out",
            str(tmp_path / "out"),
            env=env,
            timeout=600,
        )
        assert second.returncode == 0, second.stderr[-3000:]
        prompt = server.requests[0].text("user")
    assert f"[{relu_decision}]" in prompt and "OpenMP + SIMD relu" in prompt
    leaky = json.loads(second.stdout)[0]["steps"][0]["decision_id"]
    used = cypher(
        graph_client,
        "MATCH (:Decision {ns: $ns, id: $id})-[u:USED]->(e:Decision) RETURN e.id AS id, u.tier AS tier",
        ns="cross-task",
        id=leaky,
    )
    assert {"id": relu_decision, "tier": "warm"} in used


def test_interrupted_run_resumes_at_the_next_step_with_the_same_incumbent(
    kope_cli, neo4j_server, graph_client, tmp_path
):
    first_script = [
        Reply(kernels.reply("OpenMP + SIMD", "parallelization", kernels.FAST)),
        Reply(kernels.reply("broken intrinsics", "instruction", kernels.BROKEN)),
    ] + [Fail(503, "down")] * 3
    with ReplayLLM(first_script) as server:
        env = env_for(neo4j_server, server, "resume", tmp_path, KOPE_LLM_MAX_RETRIES="2")
        proc = kope_cli(
            "optimize",
            "relu",
            "--proposer",
            "llm",
            "--steps",
            "5",
            "--cases",
            CASES,
            "--out",
            str(tmp_path / "out"),
            env=env,
            timeout=600,
        )
    assert proc.returncode == 10, proc.stderr[-2000:]
    assert "kept failing after 2 retries" in proc.stderr and "--resume" in proc.stderr
    assert "Traceback" not in proc.stderr
    memory = ExperienceGraph(graph_client, namespace="resume")
    # the hint names the namespace and the server it was printed for
    hint_env, hint_args = parse_hint(proc.stderr, "the run is kept: continue it with")
    assert hint_env == {"KOPE_NEO4J_URI": neo4j_server.uri}
    assert hint_args[:2] == ["optimize", "--resume"] and hint_args[3:] == ["--namespace", "resume"]
    run_id = hint_args[2]
    before = memory.run_state(run_id)
    assert [d.step for d in before.decisions] == [0, 1] and before.incumbent.id == f"{run_id}:s0"

    with ReplayLLM([Reply("still thinking, no code")]) as server:
        env = env_for(neo4j_server, server, "resume", tmp_path)
        del env["KOPE_NAMESPACE"], env["KOPE_NEO4J_URI"]  # what the hint carries must be enough
        env.update(hint_env)
        proc = kope_cli(
            *hint_args,
            "--proposer",
            "llm",
            "--steps",
            "3",
            "--json",
            "--out",
            str(tmp_path / "out"),
            env=env,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        prompt = server.requests[0].text("user")
    summary = json.loads(proc.stdout)[0]
    assert summary["resumed_at"] == 2 and [s["step"] for s in summary["steps"]] == [2]
    after = memory.run_state(run_id)
    assert [d.step for d in after.decisions] == [0, 1, 2]
    assert after.decisions[2].parent_id == f"{run_id}:s0" and after.incumbent.id == f"{run_id}:s0"
    assert f"## Incumbent kernel [{run_id}:s0]" in prompt and "(step 2)" in prompt
