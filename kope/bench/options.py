"""A bench's options from what the user asked for: a fresh bench, or the stored plan of one to resume.

``BenchRequest`` holds the options as given (``kope bench``'s arguments, or a
library caller's); ``given`` names those set explicitly (on the command line
or in the environment), which matters when resuming: the stored plan decides,
and an explicitly given option that contradicts it is an error, while
``workers``, ``evaluator`` and ``baseline`` may change between invocations.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kope.bench.plan import (
    CONFIG_ORDER,
    BenchOptions,
    check_name,
    default_name,
    file_digest,
    is_replay,
    parse_configs,
    parse_levels,
)
from kope.bench.runner import stored_options
from kope.bench.store import BenchStore
from kope.errors import UsageError

# Options that a resumed bench must agree on (when given again).
RESUME_FIXED = (
    "suite",
    "levels",
    "family",
    "limit",
    "cases",
    "target",
    "proposer",
    "steps",
    "configs",
    "name",
    "import_memory",
    "no_final",
    "final_seeds",
    "final_rep_ms",
    "repeats",
)


@dataclass(frozen=True)
class BenchRequest:
    suite: str = "builtin"
    levels: str | None = None
    family: str | None = None
    limit: int | None = None
    cases: str | None = None
    target: str = "cpu"
    proposer: str = "offline"
    steps: int = 8
    configs: str = ",".join(CONFIG_ORDER)
    workers: int = 1
    out: Path = Path("kope-bench")
    name: str | None = None
    import_memory: tuple[str, ...] = ()
    baseline: str | None = None
    no_final: bool = False  # skip the final evaluation of each pair's best kernel (kope.bench.final)
    final_seeds: int = 5
    final_rep_ms: float = 300.0
    final_min_reps: int = 5
    repeats: int = 1
    evaluator: str = "local"  # local, worker URLs, ray[://ADDRESS] or replay:DIR (kope.evaluators.spec)


def _evaluator(request: BenchRequest) -> str:
    """The request's evaluator, validated, as the plan stores it."""
    from kope.evaluators.spec import parse_evaluator

    return str(parse_evaluator(request.evaluator))


def _check_baseline(baseline: str | None, configs: tuple[str, ...]) -> None:
    if baseline is not None and baseline not in configs:
        raise UsageError(f"--baseline {baseline!r} is not one of the configurations run ({', '.join(configs)})")


def fresh_options(request: BenchRequest, model: str | None) -> BenchOptions:
    """The options of a new bench (``model``: the configured LLM model, recorded when the proposer is llm)."""
    configs = parse_configs(request.configs)
    levels = parse_levels(request.levels)
    suite = request.suite
    if suite != "builtin":
        path = Path(suite)
        if not path.exists():
            raise UsageError(
                f"suite folder not found: {suite}", hint="--suite takes `builtin` or a folder of task files"
            )
        suite = str(path.resolve())
    imports = []
    for file in request.import_memory:
        path = Path(file)
        if not path.is_file():
            raise UsageError(
                f"--import-memory file not found: {file}", hint="make one with `kope memory export -o FILE`"
            )
        imports.append({"file": str(path.resolve()), "sha256": file_digest(path)})
    _check_baseline(request.baseline, configs)
    return BenchOptions(
        suite=suite,
        levels=levels,
        family=request.family,
        limit=request.limit,
        cases=request.cases,
        target=request.target,
        proposer=request.proposer,
        model=model if request.proposer == "llm" else None,
        steps=request.steps,
        configs=configs,
        workers=request.workers,
        evaluator=_evaluator(request),
        out=request.out,
        name=check_name(request.name or default_name(request.out)),
        imports=tuple(imports),
        baseline=request.baseline,
        # a replay has no held-out cases (nor fresh timings) to give: no final evaluation
        final=not request.no_final and not is_replay(_evaluator(request)),
        final_seeds=request.final_seeds,
        final_rep_ms=request.final_rep_ms,
        final_min_reps=request.final_min_reps,
        repeats=request.repeats,
    )


def _normalised(request: BenchRequest, key: str) -> Any:
    """An option as the stored plan holds it (to compare a resumed bench's options with the stored ones)."""
    value = getattr(request, key)
    if key == "suite":
        return value if value == "builtin" else str(Path(value).resolve())
    if key == "levels":
        return parse_levels(value)
    if key == "configs":
        return parse_configs(value)
    if key == "import_memory":
        return tuple(str(Path(f).resolve()) for f in value)
    return value


def resume_options(request: BenchRequest, given: Collection[str], model: str | None) -> BenchOptions:
    """The stored options of the bench in ``request.out``, with this invocation's workers, evaluator and baseline."""
    store = BenchStore(request.out)
    if not store.exists():
        raise UsageError(f"no bench to resume in {request.out} (no plan.json)", hint="start one without --resume")
    stored = stored_options(store)
    kept = {
        **stored.to_dict(),
        "import_memory": tuple(i["file"] for i in stored.imports),
        "levels": tuple(stored.levels),
        "configs": tuple(stored.configs),
        "no_final": not stored.final,
    }
    differ = [k for k in RESUME_FIXED if k in given and _normalised(request, k) != kept[k]]
    if differ:
        raise UsageError(
            f"--resume: the bench in {request.out} was started with other options "
            f"({'; '.join(f'{k}: started with {kept[k]!r}, given {_normalised(request, k)!r}' for k in differ)})",
            hint="resume with the same options (or only --out and --resume), or start a new bench",
        )
    if stored.proposer == "llm" and model != stored.model:
        raise UsageError(
            f"--resume: the bench used model {stored.model!r}, the configuration now says {model!r}",
            hint="set KOPE_LLM_MODEL as it was",
        )
    stored.out = request.out
    if "workers" in given:
        stored.workers = request.workers
    if "evaluator" in given:  # another evaluator may resume the bench (note_resume checks its hardware)
        evaluator = _evaluator(request)
        if is_replay(evaluator) != is_replay(stored.evaluator):
            raise UsageError(
                f"--resume: the bench was evaluated by {stored.evaluator}; it cannot continue with {evaluator}",
                hint="replayed and measured pairs do not mix in one bench: resume with the same kind of evaluator",
            )
        stored.evaluator = evaluator
    if "baseline" in given:
        _check_baseline(request.baseline, stored.configs)
        stored.baseline = request.baseline
    return stored
