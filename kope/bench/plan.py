"""What a bench runs: its options, its configurations, its operators, in a stable order.

Configurations (the paper's ablations)::

    active     ACMI active context (graph-ranked hot/warm/cold tiers), memory on
    passive    the task's full chronological history (the paper's baseline), memory on
    none       hot tier only (task, incumbent, latest feedback), memory on
    no-memory  active policy with retrieval off (``LoopOptions.memory=False``)

Attempts are recorded in every configuration (so memory growth is comparable);
only ``no-memory`` never reads experience back.

Each configuration has its own memory namespace, ``bench-<name>-<config>``
(``<name>``: ``--name``, default the ``--out`` folder's name), so no
configuration can see another's experience. A fresh bench wipes those
namespaces (graph and journal) first.

Repeats (``--repeats N``): the whole bench N times, independently: repeat k
(1-based) runs in fresh namespaces of its own (``bench-<name>-<config>-r<k>``
for k >= 2; repeat 1 keeps the plain names, so a one-repeat bench is exactly
what it was before repeats existed) with proposer seed k - 1. Repeats run one
after another (repeat-major), so an interrupted bench has whole repeats first.

Order: configurations in the canonical order above (whatever order ``--configs``
lists them in); operators in suite order (family, level, operator name, as
``kope tasks list``; in a folder suite, numbers in names sort numerically, so
KernelBench's ``4_...`` comes before ``21_...``, and a file without ``FAMILY`` takes
the family of the template its traced structure matches, as its prompts do). The bench runs operator-major: the first operator under
every configuration, then the second, ... so that drifting machine load
touches every configuration alike, while inside one configuration operators
still follow suite order (memory carries across them in that order).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from kope.boundary import (
    FAMILIES,
    UNKNOWN_FAMILY,
    TaskError,
    TaskInfo,
    inferred_family,
    level_from_path,
    load_task,
    read_task_info,
    select_cases,
    suite_tasks,
    trace_tasks,
)
from kope.errors import UsageError


@dataclass(frozen=True)
class Configuration:
    name: str
    policy: str
    memory: bool
    description: str


CONFIGURATIONS: dict[str, Configuration] = {
    "active": Configuration("active", "active", True, "active context (graph-ranked tiers), memory on"),
    "passive": Configuration("passive", "passive", True, "full chronological history, memory on"),
    "none": Configuration("none", "none", True, "hot tier only, memory on"),
    "no-memory": Configuration("no-memory", "active", False, "active policy, retrieval off"),
}
CONFIG_ORDER = tuple(CONFIGURATIONS)
LEVELS = (1, 2, 3, 4)
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,47}$")
# Options that decide what a bench measures: a resumed bench must agree on all of them.
PLAN_KEYS = (
    "suite",
    "levels",
    "family",
    "limit",
    "cases",
    "target",
    "proposer",
    "model",
    "steps",
    "configs",
    "name",
    "imports",
    "final",
    "final_seeds",
    "final_rep_ms",
    "repeats",
)
NAMESPACE_MAX = 64


def parse_configs(text: str) -> tuple[str, ...]:
    """``active,none`` -> the named configurations in canonical order (duplicates dropped)."""
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise UsageError("--configs needs at least one configuration", hint=f"choose from {', '.join(CONFIG_ORDER)}")
    unknown = [n for n in names if n not in CONFIGURATIONS]
    if unknown:
        raise UsageError(f"unknown configuration {unknown[0]!r}; configurations are {', '.join(CONFIG_ORDER)}")
    return tuple(c for c in CONFIG_ORDER if c in names)


def parse_levels(text: str | None) -> tuple[int, ...]:
    """``1,2`` or ``1-3`` -> sorted levels; empty or None: every level."""
    if text is None or not text.strip():
        return ()
    levels: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise UsageError(f"bad --levels {text!r}: use levels 1-4 like 1,2 or 1-3")
        lo, hi = int(match.group(1)), int(match.group(2) or match.group(1))
        if lo > hi or lo not in LEVELS or hi not in LEVELS:
            raise UsageError(f"bad --levels {text!r}: levels are 1 to 4")
        levels.update(range(lo, hi + 1))
    return tuple(sorted(levels))


def default_name(out: Path) -> str:
    """The bench name from the output folder's name, made safe for a namespace."""
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(out).resolve().name).strip("-._")[:48]
    return base or "bench"


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise UsageError(
            f"bench name must be 1-48 letters, digits, '_', '.', '-' starting with a letter or digit (got {name!r})"
        )
    return name


def namespace_for(name: str, config: str, repeat: int = 1) -> str:
    return f"bench-{name}-{config}" + (f"-r{repeat}" if repeat > 1 else "")


@dataclass
class BenchOptions:
    suite: str = "builtin"  # "builtin" or a folder of task files
    levels: tuple[int, ...] = ()
    family: str | None = None
    limit: int | None = None
    cases: str | None = None
    target: str = "cpu"
    proposer: str = "offline"
    model: str | None = None  # the LLM model (recorded; part of the plan)
    steps: int = 8
    configs: tuple[str, ...] = CONFIG_ORDER
    workers: int = 1
    evaluator: str = "local"  # where candidates are evaluated (kope.evaluators): local, worker URLs, ray[://ADDRESS]
    out: Path = Path("kope-bench")
    name: str = ""
    imports: tuple[dict[str, Any], ...] = ()  # {"file": path, "sha256": digest}
    baseline: str | None = None
    final: bool = True  # re-evaluate each pair's best kernel on visible + held-out cases (kope.bench.final)
    final_seeds: int = 5
    final_rep_ms: float = 300.0
    final_min_reps: int = 5
    repeats: int = 1

    def final_settings(self) -> dict[str, Any]:
        """The pair's final-evaluation settings (``FinalSettings`` as a dict)."""
        from kope.bench.final import FinalSettings

        return FinalSettings(
            enabled=self.final, seeds=self.final_seeds, rep_ms=self.final_rep_ms, min_reps=self.final_min_reps
        ).to_dict()

    def plan_view(self) -> dict[str, Any]:
        data = self.to_dict()
        return {k: data[k] for k in PLAN_KEYS}

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["out"] = str(self.out)
        data["levels"] = list(self.levels)
        data["configs"] = list(self.configs)
        data["imports"] = [dict(i) for i in self.imports]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BenchOptions:
        values = dict(data)
        values["out"] = Path(values["out"])
        values["levels"] = tuple(values.get("levels") or ())
        values["configs"] = tuple(values["configs"])
        values["imports"] = tuple(values.get("imports") or ())
        return cls(**{k: v for k, v in values.items() if k in cls.__dataclass_fields__})


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def default_baseline(configs: Sequence[str]) -> str:
    """The configuration others are paired against: no-memory, else none, else the last one."""
    for name in ("no-memory", "none"):
        if name in configs:
            return name
    return configs[-1]


@dataclass(frozen=True)
class TaskEntry:
    operator: str
    family: str
    level: int | None
    path: str
    cases: tuple[str, ...]  # the selected case names: every case the metrics count
    error: str | None = None  # the task file cannot be loaded: its pairs are recorded as errors, not run

    def to_dict(self) -> dict[str, Any]:
        data = {
            "operator": self.operator,
            "family": self.family,
            "level": self.level,
            "path": self.path,
            "cases": list(self.cases),
        }
        if self.error is not None:
            data["error"] = self.error
        return data


@dataclass(frozen=True)
class Pair:
    """One unit of work: one operator under one configuration (in one repeat of the bench)."""

    config: str
    operator: str
    index: int  # position in the bench order
    repeat: int = 1  # 1-based

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.config, self.operator, self.repeat)

    @property
    def seed(self) -> int:
        """The proposer's seed: repeat k runs with seed k - 1."""
        return self.repeat - 1


@dataclass
class Plan:
    options: BenchOptions
    tasks: list[TaskEntry] = field(default_factory=list)

    @property
    def configurations(self) -> list[Configuration]:
        return [CONFIGURATIONS[c] for c in self.options.configs]

    def namespace(self, config: str, repeat: int = 1) -> str:
        return namespace_for(self.options.name, config, repeat)

    @property
    def repeats(self) -> range:
        return range(1, self.options.repeats + 1)

    def pairs(self) -> list[Pair]:
        """Repeat-major, then operator-major: every configuration of the first operator, then the second, ..."""
        order: list[Pair] = []
        for repeat in self.repeats:
            for task in self.tasks:
                for config in self.options.configs:
                    order.append(Pair(config, task.operator, len(order), repeat))
        return order

    def task(self, operator: str) -> TaskEntry:
        return next(t for t in self.tasks if t.operator == operator)


def _task_files(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.rglob("*.py") if not any(part.startswith(("_", ".")) for part in p.relative_to(folder).parts)
    )


def parse_families(text: str | None) -> tuple[str, ...]:
    """``--family``: one family or several, comma-separated (``elementwise,reduction``); empty: every family."""
    return tuple(dict.fromkeys(part.strip() for part in (text or "").split(",") if part.strip()))


def _suite_infos(
    suite: str, family: str | None, levels: tuple[int, ...] = (), note: Callable[[str], None] | None = None
) -> list[TaskInfo]:
    families = parse_families(family)
    for name in families:
        if name not in FAMILIES and name != UNKNOWN_FAMILY:
            raise UsageError(f"unknown family {name!r}; families: {', '.join(FAMILIES)}")
    if suite == "builtin":
        return [t for t in suite_tasks(None) if not families or t.family in families]
    folder = Path(suite)
    if not folder.exists():
        raise UsageError(f"suite folder not found: {folder}", hint="--suite takes `builtin` or a folder of task files")
    if not folder.is_dir():
        raise UsageError(f"--suite must be `builtin` or a folder of task files, not a file: {folder}")
    infos = []
    for path in _task_files(folder):
        level = level_from_path(path)
        if levels and level is not None and level not in levels:
            try:
                infos.append(read_task_info(path))
            except TaskError:
                continue  # a broken file of a level --levels leaves out does not stop the bench
        else:
            infos.append(read_task_info(path))
    if not infos:
        raise UsageError(f"no task files (*.py) in {suite}")
    infos = _with_inferred_families(infos, note)
    order = {f: i for i, f in enumerate(FAMILIES)}
    infos = [i for i in infos if not families or i.family in families]
    return sorted(infos, key=lambda t: (order.get(t.family, len(order)), t.level or 0, _natural(t.operator)))


def _with_inferred_families(infos: list[TaskInfo], note: Callable[[str], None] | None) -> list[TaskInfo]:
    """Files without FAMILY (a KernelBench problem) are ordered, selected by ``--family`` and reported in the
    family of the template their traced structure matches (what their prompts use too); one that matches
    nothing, or cannot be traced, stays ``unknown``. Tracing is cached and is what the offline proposer does
    first anyway."""
    unknown = [i for i in infos if i.family == UNKNOWN_FAMILY]
    if not unknown:
        return infos
    if note is not None:
        note(f"tracing {len(unknown)} task file(s) without FAMILY to place them in a family")
    try:
        trace_tasks([i.path for i in unknown])
    except TaskError as exc:
        if note is not None:
            note(f"tracing failed ({exc.message}): those tasks stay in family {UNKNOWN_FAMILY!r}")
        return infos
    placed = []
    for info in infos:
        if info.family == UNKNOWN_FAMILY:
            try:
                found = inferred_family(info.path, info.operator)
            except TaskError:
                found = None
            if found and found != UNKNOWN_FAMILY:
                info = replace(info, family=found)
        placed.append(info)
    return placed


def _natural(name: str) -> list[Any]:
    """``4_matvec`` before ``21_sigmoid`` (KernelBench's numbered problems in their own order)."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name) if part]


def _broken_entry(operator: str, level: int | None, path: Path, error: str, info: Any) -> TaskEntry:
    """A task that does not load (it imports a missing package, say): its cases as written, else one."""
    cases = tuple(c.name for c in info.cases) if info.cases else ("default",)
    return TaskEntry(operator, info.family, level, str(Path(path).resolve()), cases, error)


def is_replay(evaluator: str) -> bool:
    """Whether ``evaluator`` (as a plan stores it) answers from recorded spaces (``replay:DIR``)."""
    from kope.evaluators.spec import REPLAY

    return evaluator.startswith(REPLAY)


def _recordable(infos: list[TaskInfo], target: str, note: Callable[[str], None] | None) -> list[TaskInfo]:
    """A replay answers from recorded spaces, and `kope bench record-space` records only operators that a kernel
    template of the target computes: the others are left out of a replay bench, each with a note (on the triton
    target, normalization's channel norms), rather than failing it at their first step. None left is an error."""
    from kope.boundary import is_match, task_structure

    kept = []
    for info in infos:
        match = task_structure(Path(info.path), info.operator, target)
        if is_match(match):
            kept.append(info)
        elif note is not None:
            note(
                f"replay: {info.operator} left out: no kernel template computes it on {target}, so it has no recorded space"
            )
    if not kept:
        raise UsageError(
            f"no selected operator has a kernel template on {target}: nothing can be recorded for it, nothing replayed",
            hint="choose other operators (--family, --levels) or another --target",
        )
    return kept


def build_plan(options: BenchOptions, note: Callable[[str], None] | None = None) -> Plan:
    """Select and validate the operators (task files are loaded, so a broken one fails here, not mid-bench).

    ``note``: progress lines (tracing files without FAMILY can take a while)."""
    if options.steps < 1:
        raise UsageError("--steps must be at least 1")
    if options.workers < 1:
        raise UsageError("--workers must be at least 1")
    if options.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    check_name(options.name)
    longest = max((namespace_for(options.name, c, options.repeats) for c in options.configs), key=len)
    if len(longest) > NAMESPACE_MAX:
        raise UsageError(
            f"bench name {options.name!r} is too long for {options.repeats} repeats: namespace {longest!r} has "
            f"{len(longest)} characters (at most {NAMESPACE_MAX})",
            hint="choose a shorter --name",
        )
    infos = [
        i
        for i in _suite_infos(options.suite, options.family, options.levels, note)
        if not options.levels or i.level in options.levels
    ]
    if infos and is_replay(options.evaluator):
        infos = _recordable(infos, options.target, note)
    if options.limit is not None:
        infos = infos[: options.limit]
    if not infos:
        raise UsageError("no task of the suite matches that level/family selection")
    seen: dict[str, Path] = {}
    tasks = []
    for info in infos:
        if info.operator in seen:
            raise UsageError(
                f"operator {info.operator!r} is defined twice: {seen[info.operator]} and {info.path}",
                hint="give each task file a unique OPERATOR",
            )
        seen[info.operator] = info.path
        try:
            task = load_task(info.path) if options.suite != "builtin" else info
        except TaskError as exc:
            # The file reads as a task (its source has Model, get_inputs, valid metadata) but running it fails,
            # e.g. it imports a package this machine lacks: an error pair, and the bench goes on.
            tasks.append(_broken_entry(info.operator, info.level, info.path, exc.message, info))
            continue
        cases = select_cases(task, options.cases)
        tasks.append(
            TaskEntry(
                info.operator, info.family, info.level, str(Path(info.path).resolve()), tuple(c.name for c in cases)
            )
        )
    if options.baseline is not None and options.baseline not in options.configs:
        raise UsageError(
            f"--baseline {options.baseline!r} is not one of the configurations run ({', '.join(options.configs)})"
        )
    return Plan(options, tasks)
