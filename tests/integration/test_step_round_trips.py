"""How many statements one optimization step sends to Neo4j, counted on the real client.

A step reads the run once, into a typed StepState (the run with every decision and its outcome in one
statement, then the kernels it can start from in a second, in one read transaction), retrieves ranked
experience (active policy only) and records the attempt in one write transaction. Before the typed step
boundary the same five-step run sent, per step (statements outside the recording transaction):

    active   12, 16, 17, 17, 18   (the run read three times, kernels and outcomes one by one)
    passive   6, 12, 14, 16, 19   (two more statements per earlier attempt)
    none      6, 10, 10, 10, 11

The scripted proposer needs no LLM: correct, faster, a compile error, a response without code, then a
correct kernel again after backtracking (patience 2), so incumbent, repair and backtrack paths all run.
"""

from __future__ import annotations

from collections import Counter

import pytest

from kope.agent.loop import LoopOptions, Optimizer
from kope.agent.proposal import Proposal
from kope.boundary import load_task_view
from kope.config import load_config
from kope.context.protocol import FormatProblem
from kope.evaluators import LocalEvaluator
from kope.memory import ExperienceGraph
from tests.support import kernels
from tests.support.counting import CountingClient
from tests.support.graph import clear_graph

pytestmark = pytest.mark.slow

SCRIPT = [
    ("serial baseline", kernels.SLOW),
    ("openmp simd", kernels.FAST),
    ("broken intrinsics", kernels.BROKEN),
    ("no code", None),
    ("serial again", kernels.SLOW),
]
STATE = ("memory/run/state", "memory/kernel/by_decisions")
RETRIEVAL = "memory/retrieve/"
# what recording an attempt writes: the attempt itself and the Browser presentation of the run
# (outcome-class labels and incumbent marks, refreshed after each attempt, #13); the rest are the step's reads
RECORDING = ("memory/attempt/", "memory/present/")


class Scripted:
    name = "scripted"
    model = None

    def __init__(self) -> None:
        self.replies = iter(SCRIPT)

    def propose(self, request):
        title, code = next(self.replies)
        problem = None if code else FormatProblem("no_code", "the response holds no ```python code block")
        return Proposal(title=title, layer="other", thought="scripted", code=code, format_problem=problem)


class Recording(LocalEvaluator):
    """This machine's evaluator, keeping each step's options."""

    def __init__(self) -> None:
        self.options: list = []

    def evaluate(self, task_path, candidate, options):
        self.options.append(options)
        return super().evaluate(task_path, candidate, options)


def statements_per_step(
    neo4j_server, tmp_path, policy: str, evaluator: LocalEvaluator | None = None
) -> tuple[list[str], list[list[str]]]:
    client = CountingClient(neo4j_server.uri, neo4j_server.user, neo4j_server.password, neo4j_server.database)
    clear_graph(client)
    marks: list[int] = []

    def progress(kind, _data):
        if kind in ("run", "step"):
            marks.append(len(client.statements))

    try:
        options = LoopOptions(steps=len(SCRIPT), policy=policy, patience=2, cases="0", out_dir=tmp_path / "out")
        view, path = load_task_view("relu")
        memory = ExperienceGraph(client, namespace=f"trips-{policy}")
        summary = Optimizer(load_config(), memory, Scripted(), options, progress, evaluator).run(view, path)
    finally:
        client.close()
    steps = [client.statements[a:b] for a, b in zip(marks, marks[1:])]
    return [s.status for s in summary.steps], steps


def reads(step: list[str]) -> list[str]:
    return [name for name in step if not name.startswith(RECORDING)]


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("active", [8, 9, 10, 10, 10]),  # one of them the effect insights of the warm tier (docs/learning.md)
        ("passive", [1, 2, 2, 2, 2]),
        ("none", [1, 2, 2, 2, 2]),
    ],
)
def test_one_step_reads_the_run_once(neo4j_server, tmp_path, policy, expected):
    evaluator = Recording()
    statuses, steps = statements_per_step(neo4j_server, tmp_path, policy, evaluator)
    # the last step boots no warm worker for a next evaluation (step 3 has no code: nothing evaluated)
    assert [o.refill_pool for o in evaluator.options] == [True, True, True, False]
    assert statuses == ["correct", "correct", "compile_error", "format_error", "correct"]
    assert [len(reads(step)) for step in steps] == expected, [Counter(reads(step)) for step in steps]
    for i, step in enumerate(steps):
        state = [name for name in step if name in STATE]
        # the first step has no attempt to start from: the state is the run alone
        assert state == (["memory/run/state"] if i == 0 else list(STATE)), (i, step)
        assert set(reads(step)) - set(STATE) <= {n for n in step if n.startswith(RETRIEVAL)}, (i, step)
        assert policy == "active" or not any(n.startswith(RETRIEVAL) for n in step), (i, step)
