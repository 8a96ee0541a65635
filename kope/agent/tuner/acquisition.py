"""Acquisition: expected improvement over the incumbent, in log-speedup space.

For a candidate with predicted log speedup ``mu`` and spread ``sigma``, and the
incumbent's log speedup ``best``::

    z  = (mu - best - xi) / sigma
    EI = (mu - best - xi) * Phi(z) + sigma * phi(z)        (sigma > 0)
    EI = max(mu - best - xi, 0)                             (sigma = 0)

multiplied by the probability that the candidate is correct (a wrong kernel
improves nothing). Uncertainty drives exploration: a setting the model knows
little about has a large sigma and so a positive EI even when its mean is
below the incumbent. ``xi`` is a small margin (log 1.01: an improvement
smaller than 1% is not worth a step).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

XI = math.log(1.01)


def expected_improvement(mu: np.ndarray, sigma: np.ndarray, best: float, xi: float = XI) -> np.ndarray:
    gain = mu - best - xi
    safe = np.where(sigma > 1e-12, sigma, 1.0)
    z = gain / safe
    ei = gain * norm.cdf(z) + safe * norm.pdf(z)
    return np.where(sigma > 1e-12, ei, np.maximum(gain, 0.0))
