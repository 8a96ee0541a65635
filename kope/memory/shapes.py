"""Shape and dtype signatures of a task's cases: what "a similar problem" means to memory.

A case is a dict of parameters (``{"name": ..., "batch_size": 1024, "dim": 7168,
"DTYPE": "float32"}``). Its **shape** is every positive integer among its
parameters, lists flattened, in the order the task wrote them, and its dtype
the ``DTYPE`` (or ``dtype``) parameter; ``key`` spells both out
(``float32:1024x7168``). The rule is generic on purpose: it needs no knowledge
of what each parameter means, and it is stable for one operator's cases, which
is where it is compared most.

Two coarser views:

* **shape class** ``<dtype>:2^<b>``: the dtype and the element count rounded to
  an even power of two (``b`` = 2 * round(log2(numel) / 2), so one class spans a
  factor of four), the unit effect insights and retrieval group by;
* **case-set signature**: a short hash of the sorted case keys of an attempt's
  cases (same signature = same problem sizes, whatever the operator).

An attempt over several cases has the shape class of the majority of its cases
(the most common dtype, the median size); ties break on the sorted names.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kope.memory.ids import content_hash

DTYPE_KEYS = ("DTYPE", "dtype")
DEFAULT_DTYPE = "default"  # a case that does not name its dtype (the task's own default applies)


def _ints(value: Any) -> list[int]:
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [value] if value > 0 else []
    if isinstance(value, (list, tuple)):
        return [v for item in value for v in _ints(item)]
    return []


@dataclass(frozen=True)
class CaseShape:
    """The shape and dtype signature of one case."""

    dtype: str
    dims: tuple[int, ...]

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> CaseShape:
        dtype = next((str(params[k]) for k in DTYPE_KEYS if isinstance(params.get(k), str)), DEFAULT_DTYPE)
        dims = tuple(
            d for key, value in params.items() if key not in DTYPE_KEYS and key != "name" for d in _ints(value)
        )
        return cls(dtype, dims)

    @classmethod
    def from_key(cls, key: str) -> CaseShape:
        """The inverse of ``key`` (as stored with each case of an outcome)."""
        dtype, _, dims = key.rpartition(":")
        if not dtype:
            raise ValueError(f"not a case shape key: {key!r}")
        return cls(dtype, () if dims == "scalar" else tuple(int(d) for d in dims.split("x")))

    @property
    def key(self) -> str:
        return f"{self.dtype}:{'x'.join(str(d) for d in self.dims) or 'scalar'}"

    @property
    def numel_log2(self) -> float:
        return sum(math.log2(d) for d in self.dims)

    @property
    def shape_class(self) -> str:
        return f"{self.dtype}:2^{size_bucket(self.numel_log2)}"

    def features(self) -> dict[str, float]:
        """Numbers a cost model reads: sizes on a log scale, how ragged the innermost size is."""
        dims = self.dims or (1,)
        return {
            "numel_log2": self.numel_log2,
            "first_log2": math.log2(dims[0]),
            "last_log2": math.log2(dims[-1]),
            "max_log2": math.log2(max(dims)),
            "min_log2": math.log2(min(dims)),
            "ndims": float(len(self.dims)),
            "ragged": float(dims[-1] % 16 != 0),
        }


def size_bucket(numel_log2: float) -> int:
    return 2 * round(numel_log2 / 2)


def case_shape(case: Mapping[str, Any]) -> CaseShape:
    """The signature of a case dict (``name`` and the parameters, as ``TaskView.cases`` holds them)."""
    return CaseShape.from_params({k: v for k, v in case.items() if k != "name"})


@dataclass(frozen=True)
class ShapeSummary:
    """An attempt's (or a query's) cases, as ranking and distillation compare them."""

    signature: str  # hash of the sorted case keys
    shape_class: str
    numel_log2: float  # median over the cases
    cases: int

    @classmethod
    def of(cls, shapes: Iterable[CaseShape]) -> ShapeSummary | None:
        shapes = list(shapes)
        if not shapes:
            return None
        keys = sorted(s.key for s in shapes)
        dtypes = Counter(s.dtype for s in shapes)
        dtype = min(dtypes, key=lambda d: (-dtypes[d], d))
        size = statistics.median(s.numel_log2 for s in shapes)
        return cls(content_hash(keys, 12), f"{dtype}:2^{size_bucket(size)}", round(size, 3), len(shapes))


def summary_of_cases(cases: Iterable[Mapping[str, Any]]) -> ShapeSummary | None:
    return ShapeSummary.of(case_shape(c) for c in cases)
