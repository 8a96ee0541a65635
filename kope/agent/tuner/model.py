"""The cost model: random forests (scikit-learn) over recorded attempts.

Two forests, both ``RandomForestRegressor``:

* **speed**: log speedup of each passing case (T_ref / T_cand) from the case's
  row of features; an attempt's prediction is the mean over its cases (the log
  of the geometric-mean speedup the harness reports), computed tree by tree,
  so the spread of the trees' attempt-level predictions is the model's
  uncertainty (as in SMAC's random-forest Bayesian optimisation). Rows are
  weighted by hardware similarity: speed measured elsewhere is weaker evidence
  for this machine (``HARDWARE_WEIGHT``);
* **feasibility**: 1 for a correct attempt, 0 for any failure; the trees'
  mean is the probability that a setting is correct. Failures count at full
  weight from every machine: what fails to compile or is wrong elsewhere is
  evidence here too (the paper's cross-hardware finding).

Why a random forest and not a GP or boosted trees: the inputs are mostly
one-hot knob values with strong interactions (a tile size matters only with
one ISA), which trees split on directly; a forest trains in tens of
milliseconds on the bounded sample, needs no kernel or hyper-parameter tuning
to stay sane on a handful of points, and its per-tree spread is an
uncertainty for free, where boosted trees give only a point estimate and a GP
needs a kernel for categorical inputs and O(n^3) training.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sklearn.ensemble import RandomForestRegressor

HARDWARE_WEIGHT = {"hardware": 1.0, "class": 0.5, "vendor": 0.25, "other": 0.1}
TREES = 32
ROWS_PER_TREE = 600  # each tree fits a bootstrap sample of at most this many rows (keeps a fit in tens of ms)


@dataclass(frozen=True)
class Prediction:
    """Per candidate: mean and spread of the predicted log speedup, and the probability of being correct."""

    mean: np.ndarray
    std: np.ndarray
    p_correct: np.ndarray


class CostModel:
    def __init__(self, seed: int = 0, trees: int = TREES) -> None:
        self.seed = seed
        self.trees = trees
        self.speed: RandomForestRegressor | None = None
        self.feasibility: RandomForestRegressor | None = None
        self.p_constant = 1.0
        self.speed_rows = 0
        self.feasibility_rows = 0

    def _forest(self, rows: int) -> RandomForestRegressor:
        return RandomForestRegressor(
            n_estimators=self.trees,
            max_features=0.6,
            min_samples_leaf=1,
            max_samples=min(rows, ROWS_PER_TREE),  # an integer: weights then set how likely each row is drawn
            random_state=self.seed,
            n_jobs=1,
        )

    def fit(
        self,
        speed_x: np.ndarray,
        speed_y: np.ndarray,
        speed_w: np.ndarray,
        feas_x: np.ndarray,
        feas_y: np.ndarray,
    ) -> CostModel:
        self.speed_rows = len(speed_y)
        self.feasibility_rows = len(feas_y)
        if len(speed_y):
            self.speed = self._forest(len(speed_y)).fit(speed_x, speed_y, sample_weight=speed_w)
        if len(feas_y) and 0 < feas_y.sum() < len(feas_y):
            self.feasibility = self._forest(len(feas_y)).fit(feas_x, feas_y)
        elif len(feas_y):
            # one class only: a constant, smoothed so that it never rules a setting out on its own
            self.p_constant = (float(feas_y.sum()) + 1.0) / (len(feas_y) + 2.0)
        return self

    @property
    def trained(self) -> bool:
        return self.speed is not None

    def predict(self, speed_x: np.ndarray, cases: int, feas_x: np.ndarray) -> Prediction:
        """``speed_x``: ``cases`` rows per candidate (candidate-major); ``feas_x``: one row per candidate."""
        if self.speed is None:
            raise RuntimeError("the cost model has no speed data")
        # each fitted tree's own predict, without sklearn's per-call input validation (32 calls per proposal);
        # equal to tree.predict(x) for the float32, C-contiguous input validation would produce
        x32 = np.ascontiguousarray(speed_x, dtype=np.float32)
        per_tree = np.stack([tree.tree_.predict(x32).reshape(len(x32), -1)[:, 0] for tree in self.speed.estimators_])
        per_tree = per_tree.reshape(len(self.speed.estimators_), -1, cases).mean(axis=2)
        if self.feasibility is not None:
            p = np.clip(self.feasibility.predict(feas_x), 0.0, 1.0)
        else:
            p = np.full(per_tree.shape[1], self.p_constant)
        return Prediction(per_tree.mean(axis=0), per_tree.std(axis=0), p)
