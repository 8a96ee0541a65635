"""Context assembly reading a real Experience Graph."""

import pytest

from kope.context.budget import Budget
from kope.context.state import TaskView, build_context
from kope.memory import ExperienceGraph, synthetic

HW = synthetic.hardware("cpu-ctx0001", "x86_64-avx512", "intel")


def task(operator: str, family: str) -> TaskView:
    source = f'"""{operator}"""\nimport torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n'
    return TaskView(operator, family, 1, f"the {operator} operator", source, ({"name": "small", "n": 1024},))


@pytest.fixture
def memory(graph_client):
    return ExperienceGraph(graph_client, namespace="ctx")


def record_run(memory, run_id, operator, family, titles):
    memory.start_run(synthetic.run_spec(operator, run_id=run_id, family=family, hw=HW))
    memory.record_attempts(
        [
            synthetic.attempt(
                run_id,
                step,
                operator,
                parent=None if step == 0 else f"{run_id}:s{step - 1}",
                speedup=1.0 + 0.3 * step,
                family=family,
                hw=HW,
                title=title,
                layer="vectorization",
            )
            for step, title in enumerate(titles)
        ]
    )


def test_related_task_experience_is_warm_and_unrelated_is_left_out_when_tight(memory):
    record_run(memory, "gelu-run", "gelu", "elementwise", ["gelu baseline", "gelu AVX-512 tanh approximation"])
    record_run(memory, "gemm-run", "big_gemm", "matmul", ["gemm baseline", "gemm 6x16 micro-kernel"])
    tight = Budget(window=9_000, system=2_000, generation=1_000, recency=200, warm_cap=450, cold_cap=0)
    context, retrieval = build_context(
        task("silu", "elementwise"), target="cpu", hardware=HW, budget=tight, graph=memory
    )
    warm_ids = [item.id for item in context.items if item.tier == "warm"]
    assert warm_ids and all(i.startswith("gelu-run:") for i in warm_ids), warm_ids
    assert "gelu AVX-512 tanh approximation" in context.human_text
    assert "gemm" not in context.human_text
    assert any(lin.hit.operator == "big_gemm" for lin in retrieval.lineages)  # retrieved, but ranked out
    assert context.tokens["prompt"] <= tight.total


def test_run_state_fills_the_hot_tier(memory):
    record_run(memory, "silu-run", "silu", "elementwise", ["silu baseline", "silu vectorized"])
    big = Budget(window=60_000, system=2_000, generation=2_000, recency=500, warm_cap=8_000, cold_cap=3_000)
    context, _ = build_context(
        task("silu", "elementwise"), target="cpu", hardware=HW, budget=big, graph=memory, run_id="silu-run"
    )
    text = context.human_text
    assert "## Incumbent kernel [silu-run:s1]" in text and "silu step 1" in text  # the incumbent's kernel source
    assert 'Previous attempt ("silu vectorized")' in text
    assert "(step 2)" in text
    knowledge = [i.id for i in context.items if i.kind == "knowledge"]
    assert knowledge and all(i.startswith("K-") for i in knowledge)


def test_passive_policy_carries_every_attempt_with_code(memory):
    record_run(memory, "p-run", "silu", "elementwise", [f"attempt {i}" for i in range(5)])
    big = Budget(window=60_000, system=2_000, generation=2_000, recency=500, warm_cap=1_000, cold_cap=0)
    context, retrieval = build_context(
        task("silu", "elementwise"),
        target="cpu",
        hardware=HW,
        budget=big,
        graph=memory,
        run_id="p-run",
        policy="passive",
    )
    assert retrieval is None
    assert sorted(item.id for item in context.items) == [f"p-run:s{i}" for i in range(5)]
    positions = [context.human_text.index(f"[p-run:s{i}]") for i in range(5)]
    assert positions == sorted(positions)  # chronological in the prompt
    assert context.human_text.count("code:\n```python") == 5
