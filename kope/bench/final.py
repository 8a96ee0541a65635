"""The final evaluation of a pair: its best kernel, re-evaluated on visible and held-out cases.

A bench's numbers come from here, not from the loop. After a pair's run the
attempt it is judged by (``metrics.best_attempt``: most passing visible
cases, then highest speedup, then earliest step) is evaluated again:

* in fresh workers (the reference worker is not reused from the loop);
* with more correctness seeds and a longer timing budget (``FinalSettings``);
* on the bench's selected visible cases **and** every held-out case of the
  task (``HELDOUT_CASES``), which no prompt, template or proposer has seen;
* with ``time_incorrect``, so a kernel that fails a held-out case still gets
  its passing cases timed and is reported as correct on visible cases but
  wrong on held-out ones;
* and, its timed cases, once more **as deployed** (``FinalSettings.deployed``,
  ``harness.deployed.measure_deployed``): the kernel file imported as a user
  imports ``best.py``, in plain processes with the user's own thread and
  OpenMP settings; each case gets ``deployed_speedup`` beside ``speedup``,
  and the report prints the as-deployed figure first.

The outcome is stored with the pair (``pairs/<config>/<operator>.json``,
``final``) and never recorded in the Experience Graph, so held-out results
never reach a later prompt. Only its as-deployed figures on the visible cases
(``deployed_figures``) go onto the best attempt's Outcome, as ``kope optimize``
writes its best kernel's: what a team reading the lineage sees beside the
harness's figure. The kernel file evaluated is kept under
``runs/<config>/<operator>/final/``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kope.bench.metrics import best_attempt, geomean, positive
from kope.memory import DeployedFigures, Memory


@dataclass(frozen=True)
class FinalSettings:
    enabled: bool = True
    seeds: int = 5  # the loop uses 3
    warmup_ms: float = 50.0  # the loop uses 25
    rep_ms: float = 300.0  # the loop uses 100
    min_reps: int = 5  # as the loop (evaluator.min_reps)
    deployed: bool = True  # also time the kernel as deployed (the bench report's as-deployed speedup)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def split(cases: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Visible and held-out summaries of an outcome's cases: counts, pass rate, geometric-mean speedup."""
    parts: dict[str, dict[str, Any]] = {}
    for key, held in (("visible", False), ("heldout", True)):
        mine = [c for c in cases if bool(c.get("heldout")) is held]
        passed = [c for c in mine if c.get("passed")]
        speeds = [c["speedup"] for c in passed if positive(c.get("speedup"))]
        parts[key] = {
            "cases": len(mine),
            "passed": len(passed),
            "pass_rate": len(passed) / len(mine) if mine else None,
            "geomean_speedup": geomean(speeds),
            "speedup_cases": len(speeds),
        }
    return parts


def deployed_figures(final: dict[str, Any] | None, run_id: str) -> DeployedFigures | None:
    """The final evaluation's as-deployed figures on the visible cases, for the best attempt's Outcome in the
    graph (``Memory.record_deployed``); None when it was not measured as deployed. Held-out cases never reach the
    memory: neither their figures nor the as-deployed run's error text (which may name them) are kept."""
    outcome = (final or {}).get("outcome")
    if not final or not outcome or not final.get("decision_id") or not final["settings"].get("deployed"):
        return None
    visible = [c for c in outcome["cases"] if not c.get("heldout")]
    cases = {c["name"]: c.get("deployed_speedup") if positive(c.get("deployed_speedup")) else None for c in visible}
    speedup = geomean(cases.values())
    error = None
    if outcome.get("deployed_error") or speedup is None:
        error = "the final evaluation's as-deployed run did not time every visible case correctly"
    return DeployedFigures(run_id=run_id, decision_id=final["decision_id"], speedup=speedup, error=error, cases=cases)


def final_evaluation(
    *,
    memory: Memory,
    attempts: list[dict[str, Any]],
    cases: str | None,
    task_path: str,
    target: str,
    settings: FinalSettings,
    folder: Path,
) -> dict[str, Any]:
    """The ``final`` block of a pair: which attempt, its outcome on visible + held-out cases, the two summaries."""
    from kope.boundary import evaluate_candidate, load_task, select_cases

    task = load_task(task_path)  # TaskError (exit 2) when the harness refuses it
    selected = select_cases(task, cases)
    visible = [c.name for c in selected]
    best = best_attempt(attempts, visible)
    block: dict[str, Any] = {
        "settings": settings.to_dict(),
        "decision_id": best.get("decision_id") if best else None,
        "step": best.get("step") if best else None,
        "outcome": None,
        "status": "no_attempt",
    }
    code = memory.kernel_source(best["decision_id"]) if best else None
    chosen: list[int | str] = [c.index for c in [*selected, *task.heldout_cases]]
    if not code:
        if best is not None:
            block["status"] = "no_kernel"  # the best attempt had no code (a format error)
        block.update(split([{"heldout": c.heldout, "passed": False} for c in [*selected, *task.heldout_cases]]))
        return block
    assert best is not None  # a kernel came from it
    path = folder / f"{best['decision_id'].replace('/', '_')}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(code, encoding="utf-8")
    outcome = evaluate_candidate(
        task,
        path,
        target=target,
        cases=chosen,
        case_set="all",
        seeds=settings.seeds,
        warmup_ms=settings.warmup_ms,
        rep_ms=settings.rep_ms,
        min_reps=settings.min_reps,
        time_incorrect=True,
        fresh_reference=True,
        deployed=settings.deployed,
    ).to_dict()
    block.update(outcome=outcome, status=outcome["status"], kernel=str(path), **split(outcome["cases"]))
    block["overfit"] = bool(
        block["visible"]["cases"]
        and block["visible"]["passed"] == block["visible"]["cases"]
        and block["heldout"]["passed"] < block["heldout"]["cases"]
    )
    return block
