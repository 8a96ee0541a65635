"""The hot tier: what every prompt must hold, and how it is compressed.

Hot sections, in prompt order: the objective, the task (operator, family,
description, reference source), its cases, the target and hardware, the
target's candidate recipe (how to write and build ``ModelNew`` there, with a
complete example; ``kope.context.recipes``) (these open the prompt); the incumbent kernel, the latest feedback and the next-step
instruction (these close it). All are always present.

When hot is too big it is compressed in this order, one level at a time, each
step named in the result's notes:

1. long logs trimmed: the error excerpt keeps its first and last 15 lines;
2. the error excerpt keeps its first and last 5 lines; the per-case table of
   the latest feedback becomes a one-line summary per status;
3. the case list becomes a compact summary (count, names, parameter ranges);
4. comments, docstrings and blank lines are stripped from the reference and
   incumbent sources.

If it still does not fit, :class:`ContextBudgetError` names the sizes.
"""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kope.boundary import Hardware, parse_source
from kope.context.recipes import recipe
from kope.errors import KopeError
from kope.memory.records import StoredCase
from kope.memory.state import AttemptState

MAX_LEVEL = 5


class ContextBudgetError(KopeError):
    """The required (hot) context does not fit in the budget even after compression."""

    exit_code = 11


@dataclass(frozen=True)
class HotState:
    """The current state s: everything the hot tier is built from."""

    operator: str
    family: str
    target: str
    reference_source: str
    cases: tuple[Mapping[str, Any], ...]
    hardware: Hardware
    level: int | None = None
    description: str = ""
    objective: str = ""
    step: int = 0
    # the kernel this step starts from, its decision and outcome: the incumbent, or the state the step
    # backtracks to (or repairs, before there is an incumbent)
    incumbent: AttemptState | None = None
    latest: AttemptState | None = None  # the previous attempt, as the graph holds it
    latest_note: str | None = None  # e.g. a format problem of the last response

    def default_objective(self) -> str:
        incumbent = self.incumbent
        if incumbent is None or incumbent.code is None:
            return (
                f"Write a first correct `{self.target}` kernel for `{self.operator}` that passes every case, "
                "then make it fast. Correctness first."
            )
        speed = _fmt_speedup(incumbent.outcome.speedup_usable if incumbent.outcome else None)
        return (
            f"Make the incumbent `{self.operator}` kernel faster on this hardware (now {speed} vs PyTorch) "
            "without breaking any case. One focused change per attempt."
        )


@dataclass
class HotSections:
    head: list[tuple[str, str]] = field(default_factory=list)  # (section id, text)
    tail: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    level: int = 0


def _fmt_speedup(value: float | None) -> str:
    return f"{value:.2f}x" if isinstance(value, (int, float)) else "n/a"


def _ms(median: float | None) -> str:
    return "-" if median is None else f"{median:.3f}"


def trim_lines(text: str, keep: int) -> tuple[str, int]:
    """Keep the first and last ``keep`` lines; returns (text, lines removed)."""
    lines = text.splitlines()
    if len(lines) <= 2 * keep + 1:
        return text, 0
    removed = len(lines) - 2 * keep
    return "\n".join(lines[:keep] + [f"... [{removed} lines trimmed] ..."] + lines[-keep:]), removed


def strip_cases_block(source: str) -> str:
    """The task source without its CASES assignment (the cases have their own section)."""
    try:
        tree = parse_source(source)
    except SyntaxError:
        return source
    lines = source.splitlines()
    for node in tree.body:
        targets = [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets.append(node.target.id)
        if "CASES" in targets and node.end_lineno is not None:
            del lines[node.lineno - 1 : node.end_lineno]
            lines.insert(node.lineno - 1, "# CASES: listed in the Cases section")
            break
    return "\n".join(lines)


def trim_long_strings(source: str, keep: int) -> tuple[str, int]:
    """Python source whose multi-line string literals (a kernel's embedded C++ source) keep only their first
    and last ``keep`` lines; the Python code itself is untouched. Returns (source, lines removed)."""
    try:
        tree = parse_source(source)
    except (SyntaxError, ValueError):
        return source, 0
    spans = sorted(
        (node.lineno, node.end_lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno - 1 > 2 * keep + 1
    )
    lines = source.splitlines()
    removed = 0
    for first, last in reversed(spans):  # 1-based lines of the literal; its inner lines are first+1 .. last-1
        inner, cut = trim_lines("\n".join(lines[first : last - 1]), keep)
        lines[first : last - 1] = inner.splitlines()
        removed += cut
    return "\n".join(lines), removed


def strip_comments(source: str) -> str:
    """Python source without comments, docstrings and blank lines (kernel strings are untouched)."""
    try:
        tree = parse_source(source)
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (SyntaxError, tokenize.TokenError, IndentationError):
        return "\n".join(line for line in source.splitlines() if line.strip())
    doc_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                doc_lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    lines = source.splitlines()
    for tok in tokens:  # blank out comments in place (columns keep the code valid)
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            lines[row - 1] = lines[row - 1][:col].rstrip()
    kept = [line.rstrip() for i, line in enumerate(lines, 1) if i not in doc_lines and line.strip()]
    return "\n".join(kept)


def _case_line(case: Mapping[str, Any]) -> str:
    params = ", ".join(f"{k}={v}" for k, v in case.items() if k != "name")
    return f"- {case.get('name', '?')}: {params}"


def cases_text(cases: Sequence[Mapping[str, Any]], compact: bool) -> str:
    if not cases:
        return "One case: the module as written."
    if not compact:
        return f"{len(cases)} cases (every one must pass):\n" + "\n".join(_case_line(c) for c in cases)
    keys: dict[str, list[Any]] = {}
    for case in cases:
        for key, value in case.items():
            if key != "name":
                keys.setdefault(key, []).append(value)
    ranges = []
    for key, values in keys.items():
        numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(numbers) == len(values):
            ranges.append(f"{key} in [{min(numbers)}, {max(numbers)}]")
        else:
            ranges.append(f"{key} in {{{', '.join(sorted({str(v) for v in values}))}}}")
    names = ", ".join(str(c.get("name", "?")) for c in cases)
    return f"{len(cases)} cases (every one must pass; summarised): {names}\nParameters: " + "; ".join(ranges)


def hardware_text(target: str, hw: Hardware) -> str:
    parts = [f"target: {target}", f"hardware class: {hw.class_ or 'unknown'}"]
    if hw.cpu_model:
        parts.append(f"CPU: {hw.cpu_model} ({hw.cores} cores)")
    if hw.isa:
        parts.append("ISA: " + ", ".join(hw.isa))
    if hw.caches:
        parts.append("caches: " + ", ".join(f"{k} {v // 1024} KiB" for k, v in hw.caches.items() if isinstance(v, int)))
    gpu = hw.gpu
    if gpu:
        parts.append(f"GPU: {gpu.name} (sm {gpu.compute_capability}, {gpu.sms} SMs)")
    return "\n".join(parts)


def _case_table(cases: Sequence[StoredCase]) -> str:
    rows = ["| case | passed | ref ms | cand ms | speedup | error |", "|---|---|---|---|---|---|"]
    for case in cases:
        error = (case.error or "").replace("\n", " ")[:160]
        rows.append(
            f"| {case.name} | {'yes' if case.passed else 'no'} | {_ms(case.ref_ms)} | "
            f"{_ms(case.cand_ms)} | {_fmt_speedup(case.speedup)} | {error} |"
        )
    return "\n".join(rows)


def _case_summary(cases: Sequence[StoredCase]) -> str:
    passed = [c for c in cases if c.passed]
    failed = [c for c in cases if not c.passed]
    speeds = [c.speedup for c in passed if c.speedup is not None]
    line = f"{len(passed)}/{len(cases)} cases passed"
    if speeds:
        worst = min(passed, key=lambda c: c.speedup or 0)
        line += f"; speedups {min(speeds):.2f}x..{max(speeds):.2f}x (slowest case: {worst.name})"
    if failed:
        first = failed[0]
        reason = first.error.splitlines()[0][:160] if first.error else "failed"
        line += f"; first failing case {first.name}: {reason}"
    return line


def feedback_text(state: HotState, level: int, notes: list[str]) -> str:
    latest = state.latest
    outcome = latest.outcome if latest is not None else None
    if outcome is None and not state.latest_note:
        return "No attempt yet in this run."
    lines = []
    title = f' ("{latest.decision.title}")' if latest is not None and latest.decision.title else ""
    if outcome is not None:
        lines.append(
            f"Previous attempt{title}: {outcome.status}"
            + (f" [{outcome.error_kind}]" if outcome.error_kind else "")
            + f", {outcome.cases_passed}/{outcome.cases_total} cases passed"
            + f", speedup {_fmt_speedup(outcome.speedup_usable)}"
            + ("" if outcome.timings_valid else " (timings not valid on this target)")
        )
        excerpt = outcome.error_excerpt
        if excerpt:
            keep = {0: None, 1: 15}.get(level, 5)
            if keep is not None:
                excerpt, removed = trim_lines(excerpt, keep)
                if removed:
                    notes.append(f"error log trimmed by {removed} lines (first/last {keep} kept)")
            lines.append("Error output:\n```\n" + excerpt + "\n```")
        cases = outcome.cases
        if cases:
            if level >= 2:
                lines.append("Per case: " + _case_summary(cases))
                notes.append(f"per-case table of {len(cases)} rows summarised")
            else:
                lines.append("Per case:\n" + _case_table(cases))
    if state.latest_note:
        lines.append(state.latest_note)
    return "\n".join(lines)


def build_hot(state: HotState, level: int) -> HotSections:
    hot = HotSections(level=level)
    reference = strip_cases_block(state.reference_source)
    incumbent = state.incumbent.code if state.incumbent is not None else None
    if level >= 4:
        reference = strip_comments(reference)
        incumbent = strip_comments(incumbent) if incumbent else incumbent
        hot.notes.append("comments, docstrings and blank lines stripped from the sources")
    if level >= 5 and incumbent:
        incumbent, trimmed = trim_long_strings(incumbent, 20)
        if trimmed:
            hot.notes.append(
                f"{trimmed} lines of the incumbent's long string literals (embedded kernel sources) trimmed"
            )
    if level >= 3:
        hot.notes.append(f"case list of {len(state.cases)} summarised")
    objective = state.objective or state.default_objective()
    level_text = f", level {state.level}" if state.level else ""
    hot.head = [
        ("hot:objective", f"## Objective\n{objective}"),
        (
            "hot:task",
            f"## Task: {state.operator} ({state.family}{level_text})\n"
            + (f"{state.description}\n" if state.description else "")
            + "Reference implementation (PyTorch; your ModelNew must match it):\n```python\n"
            + reference.strip()
            + "\n```",
        ),
        ("hot:cases", "## Cases\n" + cases_text(state.cases, compact=level >= 3)),
        ("hot:target", "## Target and hardware\n" + hardware_text(state.target, state.hardware)),
        ("hot:recipe", recipe(state.target)),
    ]
    if incumbent:
        summary = ""
        o = state.incumbent.outcome if state.incumbent is not None else None
        if o:
            summary = f" ({o.cases_passed}/{o.cases_total} cases, {_fmt_speedup(o.speedup_usable)} vs PyTorch)"
        ident = f" [{state.incumbent.id}]" if state.incumbent is not None and state.incumbent.id else ""
        incumbent_text = (
            f"## Incumbent kernel{ident}{summary}\nStart from this file:\n```python\n{incumbent.strip()}\n```"
        )
    else:
        incumbent_text = "## Incumbent kernel\nNone yet: no correct kernel so far in this run."
    notes: list[str] = []
    hot.tail = [
        ("hot:incumbent", incumbent_text),
        ("hot:feedback", "## Latest feedback\n" + feedback_text(state, level, notes)),
        (
            "hot:next",
            f"## Your next step (step {state.step})\nPropose ONE decision and the complete candidate file, "
            "in the response format from the system message. Cite the ids of the experience you used.",
        ),
    ]
    hot.notes.extend(notes)
    return hot


def fit_hot(state: HotState, count: Callable[[str], int], limit: int) -> tuple[HotSections, int]:
    """The least-compressed hot tier within ``limit`` tokens, or ContextBudgetError."""
    sizes: dict[str, int] = {}
    for level in range(MAX_LEVEL + 1):
        hot = build_hot(state, level)
        sizes = {sid: count(text) for sid, text in hot.head + hot.tail}
        total = count(join_sections([t for _, t in hot.head + hot.tail]))
        if total <= limit:
            return hot, total
    detail = ", ".join(f"{sid.split(':')[1]} {n}" for sid, n in sizes.items())
    raise ContextBudgetError(
        f"the hot context needs {total} tokens after every compression step ({detail}) but the budget B_k is {limit}",
        hint="raise context.window (KOPE_CONTEXT_WINDOW) or lower the generation/recency reserves",
    )


def join_sections(texts: Sequence[str]) -> str:
    return "\n\n".join(t.strip() for t in texts if t and t.strip())
