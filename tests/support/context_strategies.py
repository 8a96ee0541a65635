"""Hypothesis strategies: random hot states, retrieved lineages, rules, knowledge and budgets."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from harness.record import Hardware
from harness.vocabulary import LAYERS as ALL_LAYERS
from harness.vocabulary import STATUSES as ALL_STATUSES
from kope.context.budget import Budget
from kope.context.hot import HotState
from kope.context.knowledge import load_knowledge
from kope.memory.records import InsightRecord, OutcomeNodeRecord
from kope.memory.retrieval import BranchSummary, Hit, Lineage, Relevance, RetrievalQuery, RetrievalResult, StepSummary
from tests.support.decisions import attempt

LABELS = ("effective", "partial", "ineffective", "negative")
STATUSES = tuple(s for s in ALL_STATUSES if s not in ("cheat_detected", "format_error"))
LAYERS = ALL_LAYERS
words = st.text(alphabet=st.sampled_from("abcdefghij klmnop\n{}()=+*;#"), min_size=0, max_size=400)
short = st.text(alphabet="abcdefghijklmnopqrstuvwxyz _-", min_size=1, max_size=40)


@st.composite
def code(draw, max_lines=120):
    lines = draw(st.integers(1, max_lines))
    body = "\n".join(f"    x{i} = y{i} * {i}  # step {i}" for i in range(lines))
    return f"import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n{body}\n        return x\n"


@st.composite
def outcome(draw):
    status = draw(st.sampled_from(STATUSES))
    n = draw(st.integers(1, 12))
    cases = [
        {
            "name": f"c{i}",
            "passed": status == "correct",
            "speedup": 2.0 if status == "correct" else None,
            "error": None if status == "correct" else draw(words),
            "ref_ms": 1.0,
            "cand_ms": 0.5,
        }
        for i in range(n)
    ]
    log_lines = draw(st.integers(0, 300))
    correct = status == "correct"
    return OutcomeNodeRecord(
        id="o",
        status=status,
        cases_total=n,
        cases_passed=n if correct else 0,
        speedup=1.5 if correct else None,
        speedup_usable=1.5 if correct else None,
        error_kind=None if correct else status,
        error_excerpt="\n".join(f"error line {i}" for i in range(log_lines)) or None,
        timings_valid=True,
        confidence=1.0,
        r=1.0,
        label="partial" if correct else "negative",
        cases_json=json.dumps(cases),
    )


@st.composite
def hot_state(draw):
    n_cases = draw(st.integers(1, 12))
    has_incumbent = draw(st.booleans())
    latest_title, latest_outcome = draw(st.none() | short), draw(st.none() | outcome())
    return HotState(
        operator=draw(st.sampled_from(["relu", "softmax", "matmul"])),
        family="elementwise",
        target="cpu",
        reference_source=draw(code(max_lines=60)).replace("ModelNew", "Model"),
        cases=tuple({"name": f"case{i}", "n": 1000 + i} for i in range(n_cases)),
        hardware=Hardware(
            id="cpu-test",
            class_="x86_64-avx512",
            vendor="intel",
            arch="x86_64",
            cpu_model="Test CPU",
            cores=2,
            isa=["avx2", "avx512f"],
            caches={},
        ),
        step=draw(st.integers(0, 40)),
        incumbent=attempt("r:s1", 1, code=draw(code())) if has_incumbent else None,
        latest=(
            attempt("r:s0", 0, title=latest_title or "", outcome=latest_outcome)
            if latest_title is not None or latest_outcome is not None
            else None
        ),
    )


@st.composite
def lineage(draw, rank: int):
    tier = draw(st.sampled_from(["operator", "family", "other"]))
    parent = draw(st.sampled_from(["p1", "p2", "p3", None]))
    label = draw(st.sampled_from(LABELS))

    def step(i):
        return StepSummary(f"a{rank}-{i}", i, draw(short), "tiling", "correct", "partial", 1.0, 1.0, 0.5)

    siblings = tuple(
        BranchSummary(
            f"s{rank}-{i}", i, draw(short), "tiling", "incorrect", "negative", 1.0, 0.0, 0.1, "incorrect:mismatch"
        )
        for i in range(draw(st.integers(0, 4)))
    )
    hit = Hit(
        id=f"D-{rank:03d}",
        run_id="run",
        step=rank,
        title=draw(short),
        thought=draw(words),
        layer=draw(st.sampled_from(LAYERS)),
        parent_id=parent,
        status="correct",
        label=label,
        a=1.2,
        r=1.1,
        d=0.7,
        conf=1.0,
        error_kind=None,
        error_excerpt=None,
        operator="relu",
        family="elementwise",
        target="cpu",
        hw_id="hw",
        hw_class="x86_64-avx512",
        vendor="intel",
        cases_total=8,
        cases_passed=8,
        diff=draw(st.none() | st.just("\n".join(f"+ line {i}" for i in range(draw(st.integers(1, 200)))))),
        code_hash=draw(st.sampled_from(["h1", "h2", None, f"u{rank}"])),
    )
    return Lineage(
        rank=rank,
        hit=hit,
        relevance=Relevance(30.0 - rank, tier, "hardware", False, False),
        chain=tuple(step(i) for i in range(draw(st.integers(0, 5)))),
        chain_omitted=draw(st.integers(0, 3)),
        siblings=siblings,
        sibling_total=len(siblings),
        sibling_counts={"effective": 0, "partial": 0, "ineffective": 0, "negative": len(siblings)},
    )


@st.composite
def retrieval(draw):
    k = draw(st.integers(0, 10))
    lineages = tuple(draw(lineage(i)) for i in range(k))
    rules = tuple(
        InsightRecord(
            id=f"I-{i}",
            kind="rule",
            family="elementwise",
            hw_class="x86_64-avx512",
            text=draw(words) or "rule",
            support=3,
            confidence=0.8,
            active=True,
        )
        for i in range(draw(st.integers(0, 3)))
    )
    return RetrievalResult(
        query=RetrievalQuery("relu"), k=max(k, 1), lineages=lineages, rules=rules, pool_considered=k, elapsed_ms=1.0
    )


@st.composite
def budget(draw):
    return Budget(
        window=draw(st.integers(2_000, 40_000)),
        system=2_000,
        generation=draw(st.integers(0, 4_000)),
        recency=draw(st.integers(0, 2_000)),
        warm_cap=draw(st.integers(0, 8_000)),
        cold_cap=draw(st.integers(0, 4_000)),
    )


@st.composite
def history(draw):
    n = draw(st.integers(0, 12))
    return tuple(
        attempt(
            f"run:s{i}",
            i,
            title=f"attempt {i}",
            layer="tiling",
            status="correct",
            label="partial",
            a=1.0 + i / 10,
            code=draw(code(max_lines=30)),
            outcome=draw(outcome()),
        )
        for i in range(n)
    )


def knowledge_docs():
    from kope.context.knowledge import select_knowledge

    return select_knowledge(load_knowledge(), "cpu", "elementwise", hardware_class="x86_64-avx512")
