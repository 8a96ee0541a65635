"""The lineage page: one self-contained HTML file (plain SVG, a few lines of script, no network).

Per operator: the decision forest (FROM edges; the children of a node are the
branches tried from its state) with nodes coloured by outcome class, sized by
speedup over PyTorch and labelled with step and speedup, the incumbents
ringed; clicking a node shows its thought, the state it started from with
that state's feedback, the evidence its prompt used, its per-case results and
its kernel diff. Per run: speedup over the steps, with the best so far.
``kope browser`` serves it (``/lineage.html``, rebuilt from the graph on every
request); ``kope memory report`` writes it to a file.
"""

from __future__ import annotations

import datetime as _dt
import html
import math
from dataclasses import dataclass

from kope.memory.lineage import LineageNode, OperatorLineages, RunInfo

COLOURS = {
    "effective": "#3FB950",
    "partial": "#C2E07E",
    "ineffective": "#FFC454",
    "negative": "#F79767",
    "failed": "#E5484D",
    None: "#D0D4DA",
}
MEANING = {  # the class is the speedup over the baseline, PyTorch (kope.memory.present.outcome_class)
    "effective": "at least 5% faster than PyTorch",
    "partial": "as fast as PyTorch, up to 5% faster",
    "ineffective": "up to 15% slower than PyTorch",
    "negative": "more than 15% slower than PyTorch",
    "failed": "not correct on every case",
}
INCUMBENT_COLOUR = "#C0392B"
SLOT = 64  # horizontal room per leaf
LEVEL = 78  # vertical room per depth
MARGIN = 40


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _ms(value: float | None) -> str:
    return f"{value:.3g}" if value is not None else "-"


def _speed(a: float | None) -> str:
    return f"{a:.2f}×" if a is not None else "?"


def radius(node: LineageNode) -> float:
    """Sized by speedup over PyTorch (area grows with it); failures small."""
    if node.status != "correct":
        return 8.0
    return 9.0 + 7.0 * math.sqrt(min(max(node.a if node.a is not None else 1.0, 0.0), 8.0))


@dataclass(frozen=True)
class Placed:
    node: LineageNode
    x: float
    y: float


def layout(group: OperatorLineages) -> dict[str, Placed]:
    """A tidy tree layout of the operator's forest: leaves on consecutive slots, parents centred above."""
    placed: dict[str, Placed] = {}
    next_slot = 0

    def visit(node_id: str, depth: int) -> float:
        nonlocal next_slot
        kids = group.children.get(node_id, [])
        if not kids:
            x = float(next_slot)
            next_slot += 1
        else:
            xs = [visit(k, depth + 1) for k in kids]
            x = (xs[0] + xs[-1]) / 2
        placed[node_id] = Placed(group.nodes[node_id], MARGIN + x * SLOT + SLOT / 2, MARGIN + depth * LEVEL)
        return x

    for root in group.roots:  # roots side by side: their subtrees never share a slot
        visit(root, 0)
    return placed


def tree_svg(group: OperatorLineages, index: dict[str, str]) -> str:
    placed = layout(group)
    width = max(p.x for p in placed.values()) + SLOT / 2 + MARGIN if placed else 200
    height = max(p.y for p in placed.values()) + LEVEL if placed else 100
    edges, nodes = [], []
    for p in placed.values():
        parent = placed.get(p.node.parent_id or "")
        if parent is not None:
            cls = "edge backtrack" if p.node.backtrack else "edge"
            edges.append(f'<line class="{cls}" x1="{parent.x:.1f}" y1="{parent.y:.1f}" x2="{p.x:.1f}" y2="{p.y:.1f}"/>')
    for p in sorted(placed.values(), key=lambda q: (q.node.run_id, q.node.step)):
        n = p.node
        r = radius(n)
        classes = " ".join(
            filter(
                None,
                [
                    "node",
                    n.cls or "unclassified",
                    "incumbent" if n.incumbent else "",
                    "root" if n.parent_id is None else "",
                ],
            )
        )
        ring = (
            f'<circle class="ring" cx="{p.x:.1f}" cy="{p.y:.1f}" r="{r + 5:.1f}" fill="none" '
            f'stroke="{INCUMBENT_COLOUR}" stroke-width="4"/>'
            if n.incumbent
            else ""
        )
        label = f"s{n.step} {_speed(n.a) if n.status == 'correct' else '✗'}"
        nodes.append(
            f'<g class="{classes}" data-id="{_e(n.id)}" data-class="{_e(n.cls or "")}" data-detail="{index[n.id]}" '
            f'tabindex="0"><title>{_e(n.caption or n.title)}</title>{ring}'
            f'<circle class="dot" cx="{p.x:.1f}" cy="{p.y:.1f}" r="{r:.1f}" fill="{COLOURS.get(n.cls, COLOURS[None])}"/>'
            f'<text x="{p.x:.1f}" y="{p.y + r + 13:.1f}" text-anchor="middle">{_e(label)}</text></g>'
        )
    return (
        f'<svg class="tree" width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'role="img" aria-label="decision tree of {_e(group.operator)}">' + "".join(edges) + "".join(nodes) + "</svg>"
    )


def steps_svg(run: RunInfo, steps: list[LineageNode]) -> str:
    """Speedup over PyTorch at each step of one run; the line is the best correct speedup so far."""
    w, h, left, bottom, top = 420, 170, 44, 28, 14
    if not steps:
        return ""
    last = max(s.step for s in steps)
    first = min(s.step for s in steps)
    top_a = max([1.2] + [s.a * 1.1 for s in steps if s.status == "correct" and s.a is not None])

    def x(step: int) -> float:
        return left + (step - first) * (w - left - 12) / max(last - first, 1)

    def y(a: float) -> float:
        return h - bottom - a * (h - bottom - top) / top_a

    parts = [
        f'<line class="axis" x1="{left}" y1="{h - bottom}" x2="{w - 8}" y2="{h - bottom}"/>',
        f'<line class="axis" x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}"/>',
        f'<line class="parity" x1="{left}" y1="{y(1.0):.1f}" x2="{w - 8}" y2="{y(1.0):.1f}"/>',
        f'<text class="tick" x="{left - 4}" y="{y(1.0) + 3:.1f}" text-anchor="end">1×</text>',
        f'<text class="tick" x="{left - 4}" y="{y(top_a / 1.1) + 3:.1f}" text-anchor="end">{top_a / 1.1:.1f}×</text>',
        f'<text class="tick" x="{(left + w) / 2:.0f}" y="{h - 6}" text-anchor="middle">step</text>',
    ]
    best: float | None = None
    line: list[str] = []
    for s in steps:
        if s.status == "correct" and s.a is not None and (best is None or s.a > best):
            best = s.a
        if best is not None:
            line.append(f"{x(s.step):.1f},{y(best):.1f}")
        parts.append(
            f'<text class="tick" x="{x(s.step):.1f}" y="{h - bottom + 12}" text-anchor="middle">{s.step}</text>'
        )
    if line:
        parts.append(f'<polyline class="best" points="{" ".join(line)}"/>')
    for s in steps:
        colour = COLOURS.get(s.cls, COLOURS[None])
        if s.status == "correct" and s.a is not None:
            parts.append(
                f'<circle class="point {s.cls or ""}" cx="{x(s.step):.1f}" cy="{y(s.a):.1f}" r="5" fill="{colour}">'
                f"<title>{_e(s.caption or s.title)}</title></circle>"
            )
        else:
            cx, cy = x(s.step), y(0.0)
            parts.append(
                f'<path class="point {s.cls or ""}" d="M{cx - 4:.1f},{cy - 4:.1f}L{cx + 4:.1f},{cy + 4:.1f}'
                f'M{cx - 4:.1f},{cy + 4:.1f}L{cx + 4:.1f},{cy - 4:.1f}" stroke="{colour}" stroke-width="2.5">'
                f"<title>{_e(s.caption or s.title)}</title></path>"
            )
    return (
        f'<figure class="steps"><svg width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" '
        f'aria-label="speedup over steps of run {_e(run.id)}">{"".join(parts)}</svg>'
        f"<figcaption>{_e(run.caption or run.id)} · {_e(run.team)} · {_e(run.proposer)}"
        f"{' · ' + _e(run.policy) if run.policy else ''} · best {_speed(run.best_speedup)}</figcaption></figure>"
    )


def _deployed_note(n: LineageNode) -> str:
    """`` · 0.93× as deployed`` for a decision whose kernel was timed as deployed (a run's best), else ``""``."""
    if n.deployed_at is None:
        return ""
    return f" · {_speed(n.deployed_speedup) if n.deployed_speedup is not None else 'no figure'} as deployed"


def _detail(group: OperatorLineages, n: LineageNode, element_id: str) -> str:
    parent = group.nodes.get(n.parent_id or "")
    facts = [
        ("run", n.run_id),
        ("step", n.step),
        ("layer", n.layer),
        ("status", n.status),
        ("class", n.cls or "(no class label: run `kope memory init`)"),
        ("speedup a", _speed(n.a) if n.status == "correct" else "-"),
        ("step ratio r", f"{n.r:.3f}"),
        ("downstream d(v)", f"{n.d:.3f}"),
        ("cases passed", f"{n.cases_passed}/{n.cases_total}" if n.cases_total is not None else "-"),
    ]
    if n.deployed_at is not None:  # a run's best kernel, timed again as deployed after the run
        facts.append(("speedup as deployed", _speed(n.deployed_speedup) if n.deployed_speedup is not None else "-"))
        if n.deployed_error:
            facts.append(("as deployed", n.deployed_error[:300]))
    if n.replayed:
        facts.append(("replayed", "yes: the outcome recorded for this setting in a recorded space, not measured now"))
    if n.incumbent:
        facts.append(("incumbent", "yes: the best correct attempt of its run"))
    if n.backtrack:
        facts.append(("backtrack", "the loop went back to this earlier state"))
    rows = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in facts)
    if parent is not None:
        feedback = f"{_e(parent.caption or parent.title)} ({_e(parent.status)})"
        if parent.error_excerpt:
            feedback += f"<pre>{_e(parent.error_excerpt[:600])}</pre>"
    elif n.parent_id:
        feedback = f"{_e(n.parent_id)} (another operator's decision)"
    else:
        feedback = "none: a root (its baseline is the PyTorch reference)"
    evidence = group.evidence.get(n.id, [])
    evidence_html = (
        "<ul>"
        + "".join(
            f"<li>{_e(e.tier)} #{e.rank} · {e.tokens} tokens · {_e(e.kind)} {_e(e.what or e.id)}</li>" for e in evidence
        )
        + "</ul>"
        if evidence
        else "<p>none (no experience was in the prompt)</p>"
    )
    cases = n.cases
    measured = n.deployed_at is not None

    def as_deployed(c: dict[str, object]) -> str:
        value = c.get("deployed_speedup")
        return f"<td>{_speed(value) if isinstance(value, int | float) else '-'}</td>" if measured else ""

    case_rows = "".join(
        f"<tr><td>{_e(c.get('name'))}</td><td>{'passed' if c.get('passed') else 'failed'}</td>"
        f"<td>{_speed(c.get('speedup')) if c.get('passed') and c.get('speedup') is not None else '-'}</td>"
        f"{as_deployed(c)}<td>{_ms(c.get('ref_ms'))}</td><td>{_ms(c.get('cand_ms'))}</td>"
        f"<td>{_e((c.get('error') or '')[:160])}</td></tr>"
        for c in cases
    )
    cases_html = (
        '<table class="cases"><tr><th>case</th><th>result</th><th>speedup</th>'
        f"{'<th>as deployed</th>' if measured else ''}<th>PyTorch ms</th>"
        f"<th>kernel ms</th><th>error</th></tr>{case_rows}</table>"
        if cases
        else "<p>no per-case results</p>"
    )
    error = f"<h4>Error</h4><pre>{_e(n.error_excerpt)}</pre>" if n.error_excerpt else ""
    return (
        f'<section class="detail" id="{element_id}" data-id="{_e(n.id)}" hidden>'
        f'<h3>{_e(n.caption or n.title)}</h3><p class="title">{_e(n.title)}</p>'
        f'<table class="facts">{rows}</table>'
        f'<h4>Thought</h4><p class="thought">{_e(n.thought or "-")}</p>'
        f"<h4>Started from</h4><p>{feedback}</p>"
        f"<h4>Evidence in the prompt</h4>{evidence_html}"
        f"<h4>Per case</h4>{cases_html}{error}"
        f'<h4>Kernel diff</h4><pre class="diff">{_e(n.diff or "(no diff: a root, or no kernel)")}</pre>'
        "</section>"
    )


STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#2A2C34;background:#F7F8FA}
header{padding:14px 24px;background:#2A2C34;color:#fff}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;color:#C8CCD2}
.legend{display:flex;flex-wrap:wrap;gap:14px;padding:10px 24px;background:#fff;border-bottom:1px solid #E1E4E8}
.legend span{display:inline-flex;align-items:center;gap:6px}
.swatch{width:14px;height:14px;border-radius:50%;display:inline-block;border:1px solid #9AA1AC}
main{display:flex;gap:18px;padding:18px 24px;align-items:flex-start}
#operators{flex:1;min-width:0}
.operator{background:#fff;border:1px solid #E1E4E8;border-radius:6px;padding:12px 16px;margin-bottom:18px}
.operator h2{margin:0 0 4px;font-size:17px}.operator .summary{margin:0 0 8px;color:#57606A}
.scroll{overflow-x:auto}
svg .edge{stroke:#F36924;stroke-width:3}svg .edge.backtrack{stroke:#6B4BBF;stroke-dasharray:6 4}
svg .node{cursor:pointer}svg .node .dot{stroke:#2A2C34;stroke-width:1}
svg .node.root .dot{stroke-width:3}svg .node.selected .dot{stroke:#0969DA;stroke-width:4}
svg .node:focus{outline:none}svg text{font-size:11px;fill:#2A2C34;paint-order:stroke;stroke:#fff;stroke-width:3px}
svg .tick{font-size:10px;fill:#57606A;stroke:none}
svg .axis{stroke:#9AA1AC}svg .parity{stroke:#9AA1AC;stroke-dasharray:4 3}
svg .best{fill:none;stroke:#2A2C34;stroke-width:1.5}
.runs{display:flex;flex-wrap:wrap;gap:12px}figure.steps{margin:0}figcaption{font-size:12px;color:#57606A}
#details{width:520px;position:sticky;top:12px;max-height:calc(100vh - 24px);overflow:auto;background:#fff;
border:1px solid #E1E4E8;border-radius:6px;padding:12px 16px}
.detail h3{margin:0 0 2px;font-size:16px}.detail .title{margin:0 0 8px;color:#57606A}
.detail h4{margin:12px 0 4px}table{border-collapse:collapse}th,td{text-align:left;padding:2px 8px 2px 0;vertical-align:top}
table.cases td,table.cases th{border-bottom:1px solid #EEF0F2;font-size:12px}
pre{background:#F6F8FA;padding:8px;overflow:auto;font-size:12px;white-space:pre}.thought{white-space:pre-wrap}
"""

SCRIPT = """
document.querySelectorAll('svg .node').forEach(function (g) {
  function show() {
    document.querySelectorAll('.detail').forEach(function (s) { s.hidden = true; });
    document.querySelectorAll('svg .node.selected').forEach(function (n) { n.classList.remove('selected'); });
    document.getElementById(g.dataset.detail).hidden = false;
    document.getElementById('hint').hidden = true;
    g.classList.add('selected');
  }
  g.addEventListener('click', show);
  g.addEventListener('keydown', function (e) { if (e.key === 'Enter') { show(); } });
});
"""


def render_page(namespace: str, groups: list[OperatorLineages], *, generated_at: float | None = None) -> str:
    when = _dt.datetime.fromtimestamp(generated_at, _dt.UTC) if generated_at is not None else _dt.datetime.now(_dt.UTC)
    index: dict[str, str] = {}
    for group in groups:
        for node_id in group.nodes:
            index[node_id] = f"d{len(index)}"
    legend = "".join(
        f'<span><i class="swatch" style="background:{COLOURS[c]}"></i><b>{c}</b> {_e(MEANING[c])}</span>'
        for c in MEANING
    )
    legend += (
        f'<span><i class="swatch" style="border:3px solid {INCUMBENT_COLOUR}"></i>incumbent (a run\'s best)</span>'
        '<span><i class="swatch" style="border:3px solid #2A2C34"></i>root (baseline: PyTorch)</span>'
        "<span>circle area: speedup over PyTorch · dashed purple edge: backtrack</span>"
    )
    sections, details = [], []
    for group in groups:
        best = group.best
        summary = (
            f"best {_speed(best.a)}{_deployed_note(best)} (s{best.step} {_e(best.title)}, run {_e(best.run_id)})"
            if best is not None
            else "no correct attempt yet"
        )
        runs = "".join(steps_svg(run, group.run_steps(run.id)) for run in group.runs)
        sections.append(
            f'<section class="operator" data-operator="{_e(group.operator)}">'
            f"<h2>{_e(group.operator)} <small>({_e(group.family)})</small></h2>"
            f'<p class="summary">{len(group.nodes)} decisions in {len(group.runs)} runs; {summary}</p>'
            f'<div class="scroll">{tree_svg(group, index)}</div>'
            f'<h3>Speedup over the steps of each run</h3><div class="runs">{runs}</div></section>'
        )
        details += [_detail(group, n, index[n.id]) for n in group.nodes.values()]
    body = "".join(sections) if sections else "<p>This namespace holds no decisions yet.</p>"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>KOPE lineages · {_e(namespace)}</title><style>{STYLE}</style></head><body>"
        f"<header><h1>KOPE lineages · namespace {_e(namespace)}</h1>"
        f"<p>{sum(len(g.nodes) for g in groups)} decisions of {len(groups)} operators · "
        f"generated {when.strftime('%Y-%m-%d %H:%M')} UTC</p></header>"
        f'<div class="legend">{legend}</div>'
        f'<main><div id="operators">{body}</div><aside id="details">'
        '<p id="hint">Click a decision to see its thought, evidence, per-case results and diff.</p>'
        f"{''.join(details)}</aside></main><script>{SCRIPT}</script></body></html>\n"
    )
