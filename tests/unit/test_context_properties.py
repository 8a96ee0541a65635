"""Properties of prompt assembly over random states, graphs and budgets (hypothesis)."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kope.context.assemble import ContextAssembler
from kope.context.hot import MAX_LEVEL, ContextBudgetError, build_hot, join_sections
from tests.support.context_strategies import budget, history, hot_state, knowledge_docs, retrieval

HOT_HEADINGS = (
    "## Objective",
    "## Task:",
    "## Cases",
    "## Target and hardware",
    "## Incumbent kernel",
    "## Latest feedback",
    "## Your next step",
)
KNOWLEDGE = knowledge_docs()
SETTINGS = settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def assemble(state, b, policy, graph, hist):
    return ContextAssembler(b).assemble(state, policy=policy, retrieval=graph, knowledge=KNOWLEDGE, history=hist)


@SETTINGS
@given(
    state=hot_state(),
    b=budget(),
    policy=st.sampled_from(["active", "passive", "none"]),
    graph=retrieval(),
    hist=history(),
)
def test_prompt_never_exceeds_the_budget_and_hot_is_complete_or_refused(state, b, policy, graph, hist):
    assembler = ContextAssembler(b)
    try:
        ctx = assembler.assemble(state, policy=policy, retrieval=graph, knowledge=KNOWLEDGE, history=hist)
    except ContextBudgetError as exc:
        most_compressed = build_hot(state, MAX_LEVEL)
        needed = assembler.count(join_sections([t for _, t in most_compressed.head + most_compressed.tail]))
        assert needed > b.total, "refused although the compressed hot tier fits"
        assert str(needed) in str(exc) and str(b.total) in str(exc)
        return
    assert ctx.tokens["prompt"] <= b.total
    assert assembler.count(ctx.human_text) == ctx.tokens["prompt"]
    for heading in HOT_HEADINGS:
        assert heading in ctx.human_text, heading
    if state.incumbent is not None and state.incumbent.code:
        assert "class ModelNew" in ctx.human_text
    assert ctx.tokens["warm"] <= (b.warm_cap if policy == "active" else b.total)
    if policy == "active":
        assert ctx.tokens["cold"] <= b.cold_cap
    if policy == "none":
        assert ctx.items == []


@SETTINGS
@given(state=hot_state(), b=budget(), graph=retrieval(), hist=history())
def test_same_inputs_give_the_same_prompt(state, b, graph, hist):
    try:
        first = assemble(state, b, "active", graph, hist)
    except ContextBudgetError:
        return
    second = assemble(state, b, "active", graph, hist)
    assert first.human_text == second.human_text and first.items == second.items


@SETTINGS
@given(state=hot_state(), graph=retrieval())
def test_items_are_unique_and_siblings_do_not_crowd_the_tier(state, graph):
    from kope.context.budget import Budget

    try:
        ctx = assemble(state, Budget(60_000, 2_000, 2_000, 500, 20_000, 4_000), "active", graph, ())
    except ContextBudgetError:
        return
    ids = [item.id for item in ctx.items]
    assert len(ids) == len(set(ids))
    parents = {}
    for lineage in graph.lineages:
        if lineage.hit.id in ids and lineage.relevance.operator_tier != "other":
            key = lineage.hit.parent_id or lineage.hit.id
            parents[key] = parents.get(key, 0) + 1
    assert all(count <= 2 for count in parents.values()), parents
