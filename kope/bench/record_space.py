"""``kope bench record-space``: measure a bounded set of template settings per operator, once, for replay.

For each selected operator the offline proposer's template (the one that computes the task's
traced structure) is rendered with a set of settings of the knobs that matter for the operator
(the others stay at their defaults, as the tuner proposes them):

* the full grid when it has at most ``max_settings`` settings (design ``grid``);
* else (design ``one-knob+sample``) the defaults, every single-knob change from them (each
  isolates one knob's effect; all of them even when they alone exceed ``max_settings``), then a
  random sample of the rest of the grid, seeded by ``seed``, template and operator, up to
  ``max_settings``.

With ``transfer_from`` (a folder of recorded spaces; design suffix ``+transfer`` where it added one) each
operator's design also holds the ``TRANSFER_TOP`` fastest correct settings of every other operator of its template
recorded there, as this operator reads them (its irrelevant knobs at their defaults), where not in the design yet.
A replay may only propose recorded settings, so without them memory cannot propose a setting another operator
found best whenever that setting is not in this operator's sample (48 of the 83 pairs of an operator and an
earlier operator of its template in ``benchmarks/spaces-r2``); in a live run every setting can be proposed.
Both configurations of a bench search the same, larger space.

Each setting is evaluated with the real harness on this machine (``evaluate_code``, the loop's
evaluation) and its outcome is added to the operator's space file (``kope.evaluators.space``),
which is rewritten atomically after every setting. ``resume`` continues a recording: settings
already in the file are skipped; its harness options, hardware, template and task must match.
Operators without a template are skipped (nothing to replay: their runs use no template setting).

The reference is the same in every setting of a space, so its measured time is the recording's control:
once an operator's settings are recorded (and again on ``resume``), a setting whose reference time on some
case is more than ``REF_DRIFT`` times off the space's median for that case was measured while the machine
was disturbed, and is measured again (at most ``REMEASURE`` times, keeping the measurement whose reference
is nearest the median; the others' speedups are kept in the entry's ``remeasured``). One disturbed
measurement could otherwise become a space's optimum (a hardswish setting recorded at 6.44x, its reference
6.7x slower than in the other 39 settings, every other setting at 0.90-1.11x).

The optimum is then confirmed (``confirm`` > 0, the default ``CONFIRM``): the fastest setting is measured
``confirm`` more times and keeps the measurement with the median speedup; if another, unconfirmed setting is now
the fastest, it is confirmed in turn, until the fastest setting is a confirmed one (at most ``CONFIRM_MAX``
settings per space). The fastest of ~50 noisy measurements is biased upwards (the winner's curse): on
``benchmarks/spaces-r4`` (a noisy VM, the reference's CV 0.16 within a measurement) a median of 3 settings per space
are within 90 % of its optimum and 6 of its 38 optima stand alone, where spaces-r2 and spaces-r3 have a median of 9.
A replay's bench measures steps to 90 % of the optimum: an optimum that is one lucky measurement no search reaches.
"""

from __future__ import annotations

import math
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kope.agent.tuner import Tuner, settings_key
from kope.boundary import (
    Hardware,
    Outcome,
    TaskInfo,
    evaluate_code,
    hardware_for,
    harness_version,
    is_match,
    read_task_info,
    render_for_task,
    select_cases,
    suite_tasks,
    task_structure,
    templates_for_target,
    timing_budget,
)
from kope.errors import UsageError
from kope.evaluators.replay import file_sha256
from kope.evaluators.space import SpaceFile, read_spaces
from kope.memory.ids import kernel_id

Note = Callable[[str], None]
DEFAULT_MAX_SETTINGS = 24
TRANSFER_TOP = 2  # --transfer-from: this many fastest settings of each other operator of the template
REF_DRIFT = 1.25  # a setting whose reference time is this many times off the space's median is measured again ...
REMEASURE = 2  # ... at most this many times
CONFIRM = 2  # the fastest setting of a space is measured this many more times (the median kept) ...
CONFIRM_MAX = 6  # ... and so is the next fastest while it is unconfirmed, for at most this many settings


@dataclass(frozen=True)
class RecordRequest:
    out: Path
    family: str | None = None
    operators: tuple[str, ...] = ()
    cases: str | None = None
    target: str = "cpu"
    max_settings: int = DEFAULT_MAX_SETTINGS
    seed: int = 0
    warmup_ms: float | None = None
    rep_ms: float | None = None  # --budget-ms: measured time per implementation and case
    min_reps: int | None = None
    resume: bool = False
    transfer_from: Path | None = None  # a folder of recorded spaces whose operators' best settings join the design
    confirm: int = CONFIRM  # the optimum's extra measurements (0: none)


@dataclass(frozen=True)
class Planned:
    task: TaskInfo
    template: Any  # harness KernelTemplate
    match: Any  # its structure match
    served: str  # the operator the template renders the task as
    design: str
    settings: list[dict[str, Any]]


def design(
    template: Any, served: str, max_settings: int, seed: int, transfer: Sequence[SpaceFile] = ()
) -> tuple[str, list[dict[str, Any]]]:
    """(design name, the settings to evaluate, in order). ``transfer``: recorded spaces whose operators of this
    template (other than ``served``) add their ``TRANSFER_TOP`` fastest settings (design suffix ``+transfer``)."""
    tuner = Tuner(template, seed)
    grid = tuner.candidates(served)
    kind, chosen = _base_design(template, grid, served, max_settings, seed)
    base = len(chosen)
    valid = {settings_key(s) for s in grid}
    taken = {settings_key(s) for s in chosen}
    for space in transfer:
        if space.template != template.name or space.served_as == served:
            continue
        for entry in space.ranked()[:TRANSFER_TOP]:
            setting = tuner.space.pin(served, entry["settings"])
            key = settings_key(setting)
            if key in valid and key not in taken:
                taken.add(key)
                chosen.append(setting)
    return (f"{kind}+transfer" if len(chosen) > base else kind), chosen


def _base_design(
    template: Any, grid: list[dict[str, Any]], served: str, max_settings: int, seed: int
) -> tuple[str, list[dict[str, Any]]]:
    """The design without transfer: the grid when small, else the defaults, every one-knob change and a sample."""
    if len(grid) <= max_settings:
        return "grid", list(grid)
    defaults = template.default_settings()
    chosen = [defaults]
    for knob in template.relevant_knobs(served):
        chosen.extend({**defaults, knob.name: v} for v in knob.values if v != defaults[knob.name])
    taken = {settings_key(s) for s in chosen}
    rest = [s for s in grid if settings_key(s) not in taken]
    random.Random(f"{seed}:{template.name}:{served}").shuffle(rest)
    chosen.extend(rest[: max(0, max_settings - len(chosen))])
    return "one-knob+sample", chosen


def _tasks(request: RecordRequest) -> list[TaskInfo]:
    tasks = suite_tasks(request.family)
    if not tasks:
        raise UsageError(f"the built-in suite has no operator of family {request.family!r}")
    if request.operators:
        by_name = {t.operator: t for t in tasks}
        missing = [o for o in request.operators if o not in by_name]
        if missing:
            where = f"family {request.family}" if request.family else "the built-in suite"
            raise UsageError(f"unknown operator(s) in {where}: {', '.join(missing)}")
        tasks = [by_name[o] for o in request.operators]
    return tasks


def plan(request: RecordRequest, note: Note) -> list[Planned]:
    """The operators to record, each with its template and settings (skips those without a template)."""
    if request.max_settings < 1:
        raise UsageError("--max-settings must be at least 1")
    if request.confirm < 0:
        raise UsageError("--confirm must be 0 or more")
    templates = templates_for_target(request.target)
    transfer = read_spaces(request.transfer_from) if request.transfer_from is not None else []
    planned = []
    for task in _tasks(request):
        match = task_structure(task.path, task.operator, request.target)
        if not is_match(match):
            note(f"{task.operator}: skipped, no kernel template computes it ({match.explanation()})")
            continue
        template = templates[match.template]
        served = str(getattr(match, "operator", None) or task.operator)
        kind, settings = design(template, served, request.max_settings, request.seed, transfer)
        planned.append(Planned(task, template, match, served, kind, settings))
    if not planned:
        raise UsageError("no selected operator has a kernel template: nothing to record")
    return planned


def _harness_options(request: RecordRequest, task: TaskInfo) -> dict[str, Any]:
    budget = timing_budget(warmup_ms=request.warmup_ms, rep_ms=request.rep_ms, min_reps=request.min_reps)
    return {
        "cases": [c.name for c in select_cases(read_task_info(task.path), request.cases)],
        "case_selection": request.cases,
        "seeds": 3,  # the loop's correctness trials per case (harness EvalOptions default)
        "warmup_ms": budget.warmup_ms,
        "rep_ms": budget.rep_ms,
        "min_reps": budget.min_reps,
        "harness_version": harness_version(),
    }


def _open(request: RecordRequest, item: Planned, hardware: Hardware) -> SpaceFile:
    path = request.out / SpaceFile.file_name(item.task.operator, item.template.name)
    harness = _harness_options(request, item.task)
    fresh = SpaceFile(
        operator=item.task.operator,
        family=str(item.task.family),
        level=item.task.level,
        template=item.template.name,
        served_as=item.served,
        target=request.target,
        task_sha256=file_sha256(Path(item.task.path)),
        hardware=hardware,
        harness=harness,
        design={
            "kind": item.design,
            "max_settings": request.max_settings,
            "seed": request.seed,
            **(
                {"transfer_from": request.transfer_from.name, "transfer_top": TRANSFER_TOP}
                if request.transfer_from
                else {}
            ),
            "knobs": [k.name for k in item.template.relevant_knobs(item.served)],
            "grid_size": len(Tuner(item.template).candidates(item.served)),
            "planned": len(item.settings),
            **({"confirm": request.confirm} if request.confirm else {}),
        },
    )
    if not path.exists():
        return fresh
    if not request.resume:
        raise UsageError(f"{path} already exists", hint="continue the recording with --resume, or choose another --out")
    old = SpaceFile.read(path)
    checks = {
        "hardware": (old.hardware.id, hardware.id),
        "harness options": (
            {k: v for k, v in old.harness.items() if k != "harness_version"},
            {k: v for k, v in harness.items() if k != "harness_version"},
        ),
        "task file": (old.task_sha256, fresh.task_sha256),
        "template": (old.served_as, fresh.served_as),
    }
    for what, (before, now) in checks.items():
        if before != now:
            raise UsageError(
                f"--resume: {path} was recorded with another {what} ({before} vs now {now})",
                hint="resume with the options it was recorded with, or record into another --out",
            )
    old.design = {**fresh.design, "planned": max(fresh.design["planned"], len(old.settings))}
    return old


def _eta(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def record_spaces(request: RecordRequest, note: Note, progress: Note) -> list[Path]:
    """Record every selected operator's space into ``request.out``; the files written."""
    planned = plan(request, note)
    hardware = hardware_for(request.target)
    budget = timing_budget(warmup_ms=request.warmup_ms, rep_ms=request.rep_ms, min_reps=request.min_reps)
    spaces = [_open(request, item, hardware) for item in planned]
    todo = [[s for s in item.settings if settings_key(s) not in space.done()] for item, space in zip(planned, spaces)]
    total = sum(len(item.settings) for item in planned)
    remaining = sum(len(t) for t in todo)
    done = total - remaining
    if done:
        note(f"resuming: {done} of {total} settings already recorded")
    spent, measured = 0.0, 0
    paths = []
    scratch = Path(tempfile.mkdtemp(prefix="kope-record-space-"))  # the candidate files, removed at the end

    def measure(item: Planned, setting: dict[str, Any], last: bool = False) -> tuple[str, Outcome]:
        code = render_for_task(item.template, item.match, setting)
        where = scratch / f"{item.task.operator}.py"
        outcome = evaluate_code(
            Path(item.task.path), code, where, target=request.target, cases=request.cases, budget=budget, last=last
        )
        return kernel_id(code), outcome

    for item, space, settings in zip(planned, spaces, todo):
        path = request.out / SpaceFile.file_name(item.task.operator, item.template.name)
        for setting in settings:
            began = time.monotonic()
            kernel, outcome = measure(item, setting)
            space.add(setting, kernel, outcome)
            space.write(path)
            spent += time.monotonic() - began
            measured += 1
            done += 1
            left = spent / measured * (remaining - measured)
            speed = f"{outcome.speedup:.2f}x" if outcome.speedup else "-"
            progress(
                f"[{done}/{total}] {item.task.operator} / {item.template.name} {_changes(item, setting)}: "
                f"{outcome.status.value} {speed}; {spent / measured:.1f} s per setting, about {_eta(left)} left"
            )
        if not settings and not path.exists():
            space.write(path)
        _remeasure_disturbed(item, space, path, measure, progress)
        _confirm_optimum(item, space, path, measure, progress, request.confirm)
        paths.append(path)
    shutil.rmtree(scratch, ignore_errors=True)
    return paths


def _reference_times(outcome: dict[str, Any]) -> dict[str, float]:
    return {
        c["name"]: c["ref_ms"]["median"]
        for c in outcome.get("cases") or ()
        if (c.get("ref_ms") or {}).get("median", 0) > 0
    }


def _drift(times: dict[str, float], medians: dict[str, float]) -> float:
    return math.exp(max((abs(math.log(ms / medians[n])) for n, ms in times.items() if n in medians), default=0.0))


def reference_medians(space: SpaceFile) -> dict[str, float]:
    """Per case, the median of the reference times of the space's settings (cases with at least 3)."""
    by_case: dict[str, list[float]] = {}
    for entry in space.settings:
        for name, ms in _reference_times(entry["outcome"]).items():
            by_case.setdefault(name, []).append(ms)
    return {name: statistics.median(v) for name, v in by_case.items() if len(v) >= 3}


def reference_drift(space: SpaceFile) -> list[float]:
    """Per entry of ``space``: how many times its reference time is off the space's median, on the case where
    it is off most (1.0 without reference times)."""
    medians = reference_medians(space)
    return [_drift(_reference_times(e["outcome"]), medians) for e in space.settings]


def _remeasure_disturbed(
    item: Planned,
    space: SpaceFile,
    path: Path,
    measure: Callable[[Planned, dict[str, Any]], tuple[str, Outcome]],
    progress: Note,
) -> None:
    """Measure again every setting whose reference time is more than REF_DRIFT x off the space's median (module
    notes), at most REMEASURE times each; keep the measurement whose reference is nearest the median."""
    tries: dict[int, int] = {}
    while True:
        medians = reference_medians(space)
        drift = reference_drift(space)
        again = [i for i, d in enumerate(drift) if d > REF_DRIFT and tries.get(i, 0) < REMEASURE]
        if not again:
            return
        for i in again:
            entry = space.settings[i]
            tries[i] = tries.get(i, 0) + 1
            before = f"{entry['outcome'].get('speedup') or 0:.2f}x"
            _, outcome = measure(item, entry["settings"])
            now = _drift(_reference_times(outcome.to_dict()), medians)
            better = now < drift[i]
            space.remeasured(entry, outcome, {"ref_drift": round(drift[i] if better else now, 3)}, keep=better)
            if better:
                kept = f"now {outcome.speedup or 0:.2f}x (reference {now:.2f}x off)"
            else:
                kept = f"kept; measured again {outcome.speedup or 0:.2f}x, its reference {now:.2f}x off"
            space.write(path)
            progress(
                f"[again {tries[i]}/{REMEASURE}] {item.task.operator} / {item.template.name} "
                f"{_changes(item, entry['settings'])}: {before} with its reference {drift[i]:.2f}x off the "
                f"median; {kept}"
            )


def _confirm_optimum(
    item: Planned,
    space: SpaceFile,
    path: Path,
    measure: Callable[[Planned, dict[str, Any]], tuple[str, Outcome]],
    progress: Note,
    confirm: int,
) -> None:
    """Until the fastest correct setting is a confirmed one (module notes): measure it ``confirm`` more times and
    keep the median measurement; at most CONFIRM_MAX settings of the space are confirmed."""
    if confirm < 1:
        return
    while True:
        ranked = space.ranked()
        if not ranked or "confirmed" in ranked[0]:
            return
        done = sum(1 for e in space.settings if "confirmed" in e)
        if done >= CONFIRM_MAX:
            progress(
                f"[confirm] {item.task.operator} / {item.template.name}: {done} settings confirmed, the limit; the "
                f"optimum {ranked[0]['outcome']['speedup']:.2f}x ({_changes(item, ranked[0]['settings'])}) stays "
                "measured once"
            )
            return
        entry = ranked[0]
        outcomes = [measure(item, entry["settings"])[1] for _ in range(confirm)]
        speeds = [entry["outcome"]["speedup"], *(o.speedup or 0.0 for o in outcomes)]
        kept = space.confirmed(entry, outcomes)
        space.write(path)
        progress(
            f"[confirm {done + 1}] {item.task.operator} / {item.template.name} {_changes(item, entry['settings'])}: "
            f"measured {len(speeds)} times, {', '.join(f'{s:.2f}x' for s in speeds)}; kept the median "
            f"{kept.get('speedup') or 0:.2f}x"
        )


def _changes(item: Planned, setting: dict[str, Any]) -> str:
    defaults = item.template.default_settings()
    changed = [f"{k}={v}" for k, v in setting.items() if defaults.get(k) != v]
    return ", ".join(changed) or "defaults"


def summarize(paths: Sequence[Path]) -> list[str]:
    """One line per space file: settings, correct ones, the optimum."""
    lines = []
    for path in paths:
        space = SpaceFile.read(path)
        correct = sum(1 for e in space.settings if e["outcome"]["status"] == "correct")
        best = space.optimum()
        lines.append(
            f"{path}: {len(space.settings)} settings ({space.design['kind']}), {correct} correct, optimum "
            f"{f'{best:.2f}x' if best else '-'}"
        )
    return lines
