"""Every prompt carries the target's candidate recipe, and a task without FAMILY gets its structure's family."""

from __future__ import annotations

from pathlib import Path

import pytest

from kope.boundary import Hardware, load_task_view
from kope.context.budget import Budget
from kope.context.hot import MAX_LEVEL, HotState, build_hot, fit_hot
from kope.context.state import build_context
from kope.context.tokens import TokenCounter
from tests.support.decisions import attempt

HARDWARE = Hardware(
    id="cpu-0",
    class_="x86_64-avx2",
    vendor="amd",
    arch="x86_64",
    cpu_model="EPYC",
    cores=2,
    isa=["avx2"],
    caches={"l1d": 32768, "l2": 524288},
)
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench_style" / "level2" / "1_Gemm_Add_ReLU.py"
MARKS = {
    "cpu": ("from harness.cpu import compile_cpp", 'extern "C" void', "class ModelNew(nn.Module)"),
    "triton": ("@triton.jit", "_scale[(triton.cdiv(n, 1024),)]", "class ModelNew(nn.Module)"),
    "cuda": ("load_inline(", "cuda_sources=", "class ModelNew(nn.Module)"),
}


# a rendered kernel's shape: Python around a long embedded C++ source
INCUMBENT = (
    'import torch\nfrom harness.cpu import compile_cpp\n\n_SOURCE = r"""\n'
    + "".join(f"static float stage_{i}(float x) {{ return x * {i}.0f + 1.0f; }}\n" for i in range(400))
    + '"""\n_lib = compile_cpp(_SOURCE)\n\n\nclass ModelNew(torch.nn.Module):\n'
    + "    def forward(self, x):\n        return _lib.stage_0(x)\n"
)


def state(
    target: str, source: str = "x = 1  # a comment the last compression level strips\n" * 300, incumbent: str = ""
) -> HotState:
    cases = tuple({"name": f"c{i}", "n": i} for i in range(20))
    return HotState("op", "fused", target, source, cases, HARDWARE, incumbent=attempt("", code=incumbent))


@pytest.mark.parametrize("target", sorted(MARKS))
@pytest.mark.parametrize("level", range(MAX_LEVEL + 1))
def test_the_hot_tier_holds_the_targets_recipe_at_every_compression_level(target, level):
    sections = dict(build_hot(state(target), level).head)
    recipe = sections["hot:recipe"]
    assert recipe.startswith(f"## Candidate recipe ({target})")
    for mark in MARKS[target]:
        assert mark in recipe


def test_the_recipe_survives_a_budget_that_compresses_everything_else():
    counter = TokenCounter("gpt-4o")
    tightest = build_hot(state("cpu", incumbent=INCUMBENT), MAX_LEVEL)
    limit = counter.count("\n\n".join(t for _, t in tightest.head + tightest.tail)) + 5
    hot, _ = fit_hot(state("cpu", incumbent=INCUMBENT), counter.count, limit)
    assert hot.level == MAX_LEVEL and "compile_cpp" in dict(hot.head)["hot:recipe"]


def test_an_incumbent_too_large_for_the_budget_keeps_its_python_and_the_ends_of_its_kernel_source():
    """A rendered pipeline kernel measured 26,788 tokens, more than the whole hot budget: the run stopped. The
    last compression level trims the long string literals (the embedded C++), never the Python around them."""
    import ast

    counter = TokenCounter("gpt-4o")
    full = build_hot(state("cpu", incumbent=INCUMBENT), MAX_LEVEL - 1)
    limit = counter.count("\n\n".join(t for _, t in full.head + full.tail)) - 1  # level MAX_LEVEL - 1 does not fit
    hot, total = fit_hot(state("cpu", incumbent=INCUMBENT), counter.count, limit)
    assert hot.level == MAX_LEVEL and total <= limit
    text = dict(hot.tail)["hot:incumbent"]
    code = text.split("```python\n", 1)[1].rsplit("\n```", 1)[0]
    ast.parse(code)  # still a valid Python file
    assert "class ModelNew(torch.nn.Module)" in code and "_lib = compile_cpp(_SOURCE)" in code
    assert "stage_0(" in code and "stage_399(" in code and "stage_200(" not in code
    assert "... [360 lines trimmed] ..." in code
    assert any("360 lines of the incumbent's long string literals" in note for note in hot.notes)


def test_a_task_file_without_family_gets_the_family_of_its_traced_structure():
    view, _ = load_task_view(str(FIXTURE))
    assert (view.family, view.family_source) == ("fused", "structure")


def _knowledge(view) -> tuple[set[str], str]:
    budget = Budget(60_000, 2_000, 2_000, 500, 20_000, 4_000)
    context, _ = build_context(view, target="cpu", hardware=HARDWARE, budget=budget)
    return {item.id for item in context.items if item.kind == "knowledge"}, context.human_text


def test_the_inferred_family_brings_that_familys_knowledge_and_is_named_in_the_prompt():
    from dataclasses import replace

    from kope.context.knowledge import load_knowledge

    family_docs = {d.id for d in load_knowledge() if "fused" in d.families}
    view, _ = load_task_view(str(FIXTURE))
    knowledge, text = _knowledge(view)
    assert knowledge & family_docs  # documents of the `fused` family are retrieved
    assert "(fused, inferred from the traced structure" in text and "## Candidate recipe (cpu)" in text
    unknown, _ = _knowledge(replace(view, family="unknown", family_source="file"))
    assert not unknown & family_docs  # what a family-less task got before
