"""The human-readable journal: one Markdown block per run start, attempt and run end.

Each attempt block says what was tried (strategy), what changed (from which
state, which kernel), what the target said (status, measurements) and what it
means (interpretation: speedup vs the reference and, when the parent's speed is
known, the step ratio and label the graph will store).
"""

from __future__ import annotations

import datetime as _dt

from kope.memory import scoring
from kope.memory.ids import kernel_id
from kope.memory.specs import Attempt, DeployedFigures, RunSpec


def _when(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def run_block(spec: RunSpec, team: str) -> str:
    hw = spec.hardware
    return (
        f"## Run {spec.run_id} started {_when(spec.started_at)}\n\n"
        f"- task `{spec.task.id}` ({spec.task.family}, target {spec.task.target}, {len(spec.task.cases)} cases)\n"
        f"- hardware `{hw.id}` ({hw.class_}, {hw.vendor}{', ' + hw.cpu_model if hw.cpu_model else ''})\n"
        f"- proposer {spec.proposer}{' / ' + spec.model if spec.model else ''}, context {spec.context_policy}, "
        f"memory {'on' if spec.memory_enabled else 'off'}, team {team}\n\n"
    )


def attempt_block(attempt: Attempt, parent_a: float | None, parent_known: bool) -> str:
    o = attempt.outcome
    a = scoring.absolute_speedup(o)
    lines = [f"### {attempt.id} · step {attempt.step} · {_when(attempt.created_at)}", ""]
    lines.append(f"- **Strategy** ({attempt.layer}): {_one_line(attempt.title, 200)}")
    if attempt.thought.strip():
        lines.append(f"- **Thought**: {_one_line(attempt.thought)}")
    origin = f"from `{attempt.parent_id}`" if attempt.parent_id else "from the reference (a root)"
    code = (
        f"kernel `{kernel_id(attempt.code)[:12]}` ({attempt.code.count(chr(10)) + 1} lines)"
        if attempt.code is not None
        else "no code"
    )
    lines.append(f"- **Change**: {origin}; {code}")
    status = f"{o.status}, {o.cases_passed}/{o.cases_total} cases passed"
    if o.error_kind:
        status += f", {o.error_kind}"
    if attempt.replayed:
        status += " (replayed from a recorded space, not measured now)"
    lines.append(f"- **Status**: {status}")
    measures = []
    if o.speedup is not None:
        measures.append(f"speedup {o.speedup:.3f}x vs reference (geomean)")
    if not o.timings_valid:
        measures.append("timings not valid")
    if o.compile_time_s is not None:
        measures.append(f"compile {o.compile_time_s:.2f} s")
    if o.threads is not None:
        measures.append(f"{o.threads} threads")
    measures.append(f"hardware {o.hardware.id} ({o.hardware.class_})")
    lines.append(f"- **Measurements**: {', '.join(measures)}")
    if o.error_excerpt:
        lines.append(f"- **Error**: `{_one_line(o.error_excerpt, 240)}`")
    lines.append(f"- **Interpretation**: {interpretation(attempt, a, parent_a, parent_known)}")
    return "\n".join(lines) + "\n\n"


def interpretation(attempt: Attempt, a: float | None, parent_a: float | None, parent_known: bool) -> str:
    o = attempt.outcome
    if not o.ok:
        return f"not usable ({o.status}): a = 0, r = 0, label negative; evidence for what fails here"
    if a is None:
        head = "correct, speed unknown (no valid timing)"
    else:
        head = f"correct, {a:.3f}x the reference"
    if attempt.parent_id is not None and not parent_known:
        return f"{head}; step ratio vs `{attempt.parent_id}` is computed when the graph is written"
    r = scoring.step_ratio(a, True, parent_a, attempt.parent_id is not None)
    label = scoring.label_for(r, True)
    return f"{head}; r = {r:.3f} vs {'parent' if attempt.parent_id else 'root rule'} -> {label}"


def deployed_block(figures: DeployedFigures) -> str:
    """The as-deployed measurement of a run's best kernel (added to its outcome after the run)."""
    speed = f"{figures.speedup:.3f}x vs reference (geomean)" if figures.speedup is not None else "no figure"
    lines = [f"### `{figures.decision_id}` as deployed ({_when(figures.measured_at)})", "", f"- **Speedup**: {speed}"]
    if figures.cases:
        shown = ", ".join(f"{name} {'-' if v is None else f'{v:.3f}x'}" for name, v in figures.cases.items())
        lines.append(f"- **Cases**: {_one_line(shown, 240)}")
    if figures.error:
        lines.append(f"- **Error**: `{_one_line(figures.error, 240)}`")
    return "\n".join(lines) + "\n\n"


def run_end_block(run_id: str, status: str, ended_at: float, summary: str) -> str:
    return f"## Run {run_id} ended {_when(ended_at)}: {status}\n\n{summary}\n\n"
