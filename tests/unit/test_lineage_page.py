"""The lineage page rendered from typed lineages (no database): tree, colours, marks, details, offline."""

import json
import re
from html.parser import HTMLParser

from kope.memory.lineage import EvidenceItem, LineageNode, OperatorLineages, RunInfo
from kope.memory.lineage_page import COLOURS, layout, render_page


def node(step, parent=None, *, a=1.0, status="correct", cls="effective", incumbent=False, backtrack=False):
    cases = [{"name": "c0", "passed": status == "correct", "speedup": a, "error": None, "ref_ms": 1.0, "cand_ms": 0.5}]
    return LineageNode(
        id=f"run-1:s{step}",
        run_id="run-1",
        operator="relu",
        family="elementwise",
        step=step,
        parent_id=f"run-1:s{parent}" if parent is not None else None,
        title=f"title {step}",
        caption=f"s{step} change · {a:.2f}×",
        status=status,
        a=a if status == "correct" else 0.0,
        r=1.0,
        d=0.5,
        thought=f"thought of step {step}",
        diff=f"--- parent\n+++ candidate\n-old {step}\n+new {step}\n",
        cls=cls,
        incumbent=incumbent,
        backtrack=backtrack,
        cases_json=json.dumps(cases),
        cases_passed=1 if status == "correct" else 0,
        cases_total=1,
    )


def lineages():
    nodes = [
        node(0, a=0.71, cls="negative"),
        node(1, 0, a=1.4),
        node(2, 1, a=2.36, incumbent=True),
        node(3, 2, status="compile_error", cls="failed"),
        node(4, 1, a=1.45, cls="partial", backtrack=True),
    ]
    group = OperatorLineages("relu", "elementwise", nodes={n.id: n for n in nodes})
    group.roots = ["run-1:s0"]
    group.children = {"run-1:s0": ["run-1:s1"], "run-1:s1": ["run-1:s2", "run-1:s4"], "run-1:s2": ["run-1:s3"]}
    group.runs = [RunInfo("run-1", "relu", "elementwise", "local", "offline", 1.78e9, 5, caption="relu · 2026-05-28")]
    group.evidence = {"run-1:s2": [EvidenceItem("warm", 0, 120, "Decision", "run-0:s4", "s4 unroll 1→2 · 1.90×")]}
    return group


class Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.elements = []

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))


def parse(page):
    collector = Collect()
    collector.feed(page)
    return collector.elements


def test_the_tree_has_one_node_per_decision_coloured_by_class_and_an_edge_per_from():
    elements = parse(render_page("demo", [lineages()], generated_at=0))
    groups = [a for t, a in elements if t == "g" and "node" in a.get("class", "").split()]
    assert [g["data-id"] for g in groups] == [f"run-1:s{i}" for i in range(5)]
    assert [g["data-class"] for g in groups] == ["negative", "effective", "effective", "failed", "partial"]
    dots = [a for t, a in elements if t == "circle" and a.get("class") == "dot"]
    assert [d["fill"] for d in dots] == [
        COLOURS[c] for c in ("negative", "effective", "effective", "failed", "partial")
    ]
    edges = [a for t, a in elements if t == "line" and "edge" in a.get("class", "")]
    assert len(edges) == 4 and sum("backtrack" in e["class"] for e in edges) == 1


def test_the_incumbent_is_ringed_and_the_root_marked():
    elements = parse(render_page("demo", [lineages()], generated_at=0))
    groups = {a["data-id"]: a["class"].split() for t, a in elements if t == "g" and "data-id" in a}
    assert [k for k, v in groups.items() if "incumbent" in v] == ["run-1:s2"]
    assert [k for k, v in groups.items() if "root" in v] == ["run-1:s0"]
    rings = [a for t, a in elements if t == "circle" and a.get("class") == "ring"]
    assert len(rings) == 1


def test_nodes_are_sized_by_speedup():
    elements = parse(render_page("demo", [lineages()], generated_at=0))
    r = {}
    current = None
    for tag, attrs in elements:
        if tag == "g" and "data-id" in attrs:
            current = attrs["data-id"]
        if tag == "circle" and attrs.get("class") == "dot":
            r[current] = float(attrs["r"])
    assert r["run-1:s2"] > r["run-1:s1"] > r["run-1:s0"] > r["run-1:s3"]


def test_every_node_has_a_hidden_detail_with_thought_diff_evidence_and_cases():
    page = render_page("demo", [lineages()], generated_at=0)
    elements = parse(page)
    details = {a["data-id"]: a for t, a in elements if t == "section" and a.get("class") == "detail"}
    assert set(details) == {f"run-1:s{i}" for i in range(5)} and all("hidden" in a for a in details.values())
    targets = {a["data-detail"] for t, a in elements if t == "g" and "data-detail" in a}
    assert targets == {a["id"] for a in details.values()}
    section = re.search(r'<section class="detail"[^>]*data-id="run-1:s2".*?</section>', page, re.S).group(0)
    assert "thought of step 2" in section and "+new 2" in section
    assert "warm #0 · 120 tokens" in section and "s4 unroll 1→2 · 1.90×" in section
    assert "<td>c0</td><td>passed</td><td>2.36×</td>" in section


def test_each_run_has_a_speedup_over_steps_plot_with_failures_at_zero():
    page = render_page("demo", [lineages()], generated_at=0)
    figure = re.search(r'<figure class="steps">.*?</figure>', page, re.S).group(0)
    assert figure.count('<circle class="point') == 4 and figure.count('<path class="point failed') == 1
    assert '<polyline class="best"' in figure and "relu · 2026-05-28" in figure


def test_the_page_works_offline_and_escapes_what_the_graph_holds():
    group = lineages()
    evil = node(5, 2, a=1.0)
    evil = LineageNode(**{**evil.__dict__, "thought": "<script>alert(1)</script>", "title": '"><img src=x>'})
    group.nodes[evil.id] = evil
    group.children["run-1:s2"].append(evil.id)
    page = render_page("demo", [group], generated_at=0)
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert '"><img' not in page
    elements = parse(page)
    assert not [a for t, a in elements if t in ("link", "img", "iframe")]
    assert not [a for t, a in elements if t == "script" and "src" in a]
    assert not re.search(r"(src|href)=\"https?:", page)


def test_layout_centres_parents_over_their_children_and_never_overlaps():
    placed = layout(lineages())
    positions = {(p.x, p.y) for p in placed.values()}
    assert len(positions) == len(placed)
    s1, s2, s4 = placed["run-1:s1"], placed["run-1:s2"], placed["run-1:s4"]
    assert s1.x == (s2.x + s4.x) / 2 and s2.y == s4.y > s1.y


def test_an_empty_namespace_says_so():
    assert "holds no decisions yet" in render_page("empty", [], generated_at=0)
