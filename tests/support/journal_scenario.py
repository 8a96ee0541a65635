"""A small recorded history whose graph holds every kind of relationship, for the journal rebuild tests.

Four runs on one machine: failures and effective steps that distil into a validity rule and a pattern,
later attempts that cite those insights, an earlier decision and a knowledge document (USED edges of
every kind), branches (FROM differs from NEXT), an interrupted run that is not distilled, and an explicit
distillation at the end. Works on any memory store (``ExperienceGraph`` or ``RemoteMemory``).
"""

from __future__ import annotations

from typing import Any

from kope.memory import KnowledgeDoc, UsedItem, synthetic

HW = synthetic.hardware("cpu-aaaa", "x86_64-avx2", "intel")
RULE = "rule:normalization:x86_64-avx2:compile_error"
PATTERN = "pattern:normalization:x86_64-avx2:vectorization"


def _used(*items: tuple[str, str]) -> tuple[UsedItem, ...]:
    return tuple(
        UsedItem(kind=kind, id=ident, tier="cold" if kind == "knowledge" else "warm", rank=rank, tokens=40 + rank)
        for rank, (kind, ident) in enumerate(items)
    )


def record(memory: Any) -> None:
    """Record the history into ``memory`` (journal first, as the loop does)."""
    memory.upsert_knowledge([KnowledgeDoc(id="cpu-simd", title="x86 SIMD", text="Use 8-wide loads.", targets=("cpu",))])
    plan = [  # run id, operator, family, the evidence of its later steps, how it ends
        ("r0", "softmax", "normalization", (("knowledge", "cpu-simd"),), "finished"),
        ("r1", "layernorm", "normalization", (("insight", RULE), ("decision", "r0:s1")), "finished"),
        ("r2", "rmsnorm", "normalization", (("insight", PATTERN), ("insight", RULE), ("knowledge", "cpu-simd")), None),
        ("r3", "relu", "elementwise", (("insight", PATTERN), ("decision", "r2:s1")), "finished"),
    ]
    for rid, op, family, evidence, end in plan:
        memory.start_run(synthetic.run_spec(op, run_id=rid, family=family, hw=HW))
        steps = [
            synthetic.attempt(rid, 0, op, family=family, hw=HW, speedup=1.0),
            synthetic.attempt(rid, 1, op, parent=f"{rid}:s0", family=family, hw=HW, speedup=1.4),
            synthetic.attempt(
                rid, 2, op, parent=f"{rid}:s0", family=family, hw=HW, status="compile_error", used=_used(*evidence)
            ),
            synthetic.attempt(
                rid,
                3,
                op,
                parent=f"{rid}:s1",
                family=family,
                hw=HW,
                status="compile_error",
                layer="tiling",
                used=_used(*evidence),
            ),
        ]
        for step in steps:  # one at a time, as the loop records them
            memory.record_attempt(step)
        if end is None:
            memory.finish_run(rid, "interrupted", distill=False)
        else:
            memory.finish_run(rid, end)
    memory.distill()


# -- what a namespace holds (for comparing an original with its rebuild) ------------------------------


def cypher(graph_client, query, **params):
    records, _, _ = graph_client._driver.execute_query(query, params, database_=graph_client.database)
    return [r.data() for r in records]


def snapshot(graph_client, ns):
    """Nodes by label, relationships by type (every relationship between two nodes of the namespace), d(v)."""
    nodes = cypher(graph_client, "MATCH (n {ns: $ns}) UNWIND labels(n) AS label RETURN label, count(*) AS n", ns=ns)
    rels = cypher(graph_client, "MATCH ({ns: $ns})-[r]->({ns: $ns}) RETURN type(r) AS type, count(*) AS n", ns=ns)
    scores = cypher(graph_client, "MATCH (d:Decision {ns: $ns}) RETURN d.id AS id, d.d AS d, d.label AS l", ns=ns)
    insights = cypher(
        graph_client,
        "MATCH (i:Insight {ns: $ns}) RETURN i.id AS id, [i.active, i.support, i.confidence, i.text] AS facts",
        ns=ns,
    )
    return {
        "nodes": {r["label"]: r["n"] for r in nodes},
        "relationships": {r["type"]: r["n"] for r in rels},
        "d": {r["id"]: (r["d"], r["l"]) for r in scores},
        "insights": {r["id"]: r["facts"] for r in insights},
    }


def used_insight_edges(graph_client, ns):
    rows = cypher(graph_client, "MATCH (d:Decision {ns: $ns})-[:USED]->(i:Insight) RETURN count(*) AS n", ns=ns)
    return rows[0]["n"]
