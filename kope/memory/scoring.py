"""Speedups, step ratios, labels and the downstream score d(v): the one definition.

Definitions (docs/memory.md, "Scores"), with the cases the formulas leave open made explicit:

``a`` — absolute speedup of an attempt, T_reference / T_candidate (the harness's
    geometric mean over passing, timed cases):

    * correct outcome with valid timings: the harness's ``speedup``;
    * correct outcome without a usable speed (``speedup`` null or
      ``timings_valid`` false, e.g. under the Triton interpreter): ``None``
      (unknown);
    * any other status (incorrect, compile/runtime error, timeout, cheat,
      format error): ``0.0``. A kernel that is not correct on every case cannot
      replace anything, so its usable speedup is zero, whatever the harness
      measured on the cases that passed (the Outcome node keeps the measured
      value as ``speedup``, like the harness's record, and ``a`` as
      ``speedup_usable``).

``r`` — step ratio against the parent (the state the attempt started from):

    * not correct: ``0.0`` (a / a_parent with a = 0);
    * correct, and the attempt is a root, or the parent's ``a`` is not
      positive (a failed or speed-unknown parent): ``1.0``;
    * correct with unknown own speed: ``1.0`` (correct, speed unknown: neutral);
    * otherwise ``a / a_parent``.

``label`` — from ``r``: effective ``r >= 1.05``, partial ``1 <= r < 1.05``,
    ineffective ``0.85 <= r < 1``, negative ``r < 0.85``. A non-correct outcome
    has ``r = 0`` and is therefore always ``negative``: never effective. (The
    Outcome's ``status`` says which kind of failure it was.)

``d(v)`` — downstream score, ``d(v) = 0.5 * r_v + 0.35 * sum(d(child))``
    (0.35 = 0.5 * 0.7), kept for every Decision; recording a child updates the
    new node and all its ancestors in the same transaction.

``confidence`` — how much a measured outcome can be trusted, in (0, 1]:
    failures are certain evidence (1.0); a correct outcome with valid timings
    scores ``1 / (1 + cv)`` with ``cv`` the largest coefficient of variation of
    its reference and candidate timings (noisy timings count less); a correct
    outcome without usable timings scores 0.5.

The incumbent of a run is its best correct attempt: the highest ``a`` (unknown
speeds rank lowest), the earliest step among equals. This equals the loop's
rule "replace the incumbent only by a correct, strictly faster candidate" applied
in step order; ``cypher/memory/attempt/refresh_runs.cypher`` implements it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from kope.boundary import Outcome

EFFECTIVE_MIN = 1.05
PARTIAL_MIN = 1.0
INEFFECTIVE_MIN = 0.85
SELF_WEIGHT = 0.5
CHILD_WEIGHT = 0.5 * 0.7
LABELS: tuple[str, ...] = ("effective", "partial", "ineffective", "negative")
UNKNOWN_SPEED_CONFIDENCE = 0.5


def absolute_speedup(outcome: Outcome) -> float | None:
    if not outcome.ok:
        return 0.0
    if outcome.speedup is None or not outcome.timings_valid:
        return None
    return float(outcome.speedup)


def step_ratio(a: float | None, correct: bool, a_parent: float | None, has_parent: bool) -> float:
    if not correct:
        return 0.0
    if not has_parent or a_parent is None or a_parent <= 0 or a is None:
        return 1.0
    return a / a_parent


def label_for(r: float, correct: bool) -> str:
    if r >= EFFECTIVE_MIN and correct:
        return "effective"
    if r >= PARTIAL_MIN:
        return "partial"
    if r >= INEFFECTIVE_MIN:
        return "ineffective"
    return "negative"


def label_rank(label: str) -> int:
    return LABELS.index(label)


def downstream(r: float, child_scores: Iterable[float]) -> float:
    return SELF_WEIGHT * r + CHILD_WEIGHT * math.fsum(child_scores)


def confidence(outcome: Outcome) -> float:
    if not outcome.ok:
        return 1.0
    if outcome.speedup is None or not outcome.timings_valid:
        return UNKNOWN_SPEED_CONFIDENCE
    cvs = [
        stats.cv
        for case in outcome.cases
        for stats in (case.ref_ms, case.cand_ms)
        if stats is not None and stats.cv is not None
    ]
    return 1.0 / (1.0 + max(cvs)) if cvs else 1.0


def recompute_all(nodes: Mapping[str, tuple[float, str | None]]) -> dict[str, float]:
    """d(v) for every node from scratch. ``nodes`` maps id -> (r, parent id or None).

    The reference the tests and the benchmark compare the graph's stored scores
    against (children are summed with ``math.fsum``, as on the write path)."""
    children: dict[str, list[str]] = {key: [] for key in nodes}
    for key, (_r, parent) in nodes.items():
        if parent is not None and parent in children:
            children[parent].append(key)
    scores: dict[str, float] = {}
    for start in nodes:
        stack = [(start, False)]
        while stack:
            key, expanded = stack.pop()
            if key in scores:
                continue
            if not expanded:
                stack.append((key, True))
                stack.extend((c, False) for c in children[key] if c not in scores)
            else:
                scores[key] = downstream(nodes[key][0], sorted(scores[c] for c in children[key]))
    return scores


def incumbent_key(a: float | None, step: int) -> tuple[float, int]:
    """Sort key (max wins) of the incumbent rule: highest a, unknown lowest, earliest step."""
    return (a if a is not None else -1.0, -step)
