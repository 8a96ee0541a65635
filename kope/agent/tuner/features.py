"""Feature vectors of the cost model: knob settings, operator and family, case shape, hardware.

One ``FeatureSpace`` per kernel template: a template's knobs mean the same
code for every operator it serves, so attempts of all its operators (and on
every machine) share one table of columns:

* **settings**: one column per (knob, value), 1 where the knob has that value;
  a knob that does not matter for the attempt's operator is read at its default
  (``KernelTemplate.pinned_settings``), so irrelevant variation never looks like
  a difference;
* **operator**: one column per operator the template serves, and one per
  family (a template serves one family, so that column is constant within a
  model; it keeps the rows comparable if models ever span templates);
* **case shape** (``kope.memory.shapes.CaseShape.features``): element count,
  first/last/largest/smallest size on a log2 scale, number of sizes, whether
  the innermost size is ragged (not a multiple of 16), and the dtype;
* **hardware**: ISA features that change what code runs fast (AVX2, FMA,
  AVX-512 and its bf16/fp16 parts, AMX, NEON, SVE, RVV), cores and cache sizes
  on a log2 scale, and the vendor.

The speed model reads all four groups; the feasibility model reads settings,
operator and hardware (whether a kernel compiles and is correct does not
depend on the case size in these templates).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kope.boundary import FAMILIES, KernelTemplate
from kope.memory.shapes import CaseShape
from kope.memory.tuning import HardwareFacts

DTYPES = ("float32", "float64", "bfloat16", "float16", "default")
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "neon", "sve", "rvv")
VENDORS = ("intel", "amd", "arm", "nvidia")
CACHES = ("l1d", "l2", "l3")
SHAPE_NUMBERS = ("numel_log2", "first_log2", "last_log2", "max_log2", "min_log2", "ndims", "ragged")


def _log2(value: Any) -> float:
    return math.log2(value) if isinstance(value, (int, float)) and value > 0 else 0.0


@dataclass(frozen=True)
class FeatureSpace:
    template: KernelTemplate
    setting_columns: tuple[tuple[str, Any], ...]
    _cache: dict[Any, list[float]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def for_template(cls, template: KernelTemplate) -> FeatureSpace:
        return cls(template, tuple((k.name, v) for k in template.knobs for v in k.values))

    @property
    def names(self) -> tuple[str, ...]:
        """Column names of a speed row (a feasibility row is the same without the shape columns)."""
        settings = [f"{k}={v}" for k, v in self.setting_columns]
        operators = [f"operator={o}" for o in self.template.operators]
        families = [f"family={f}" for f in FAMILIES]
        shape = list(SHAPE_NUMBERS) + [f"dtype={d}" for d in DTYPES]
        return tuple(settings + operators + families + shape + self._hardware_names())

    @staticmethod
    def _hardware_names() -> list[str]:
        return (
            [f"isa={f}" for f in ISA_FLAGS]
            + ["cores_log2"]
            + [f"{c}_log2" for c in CACHES]
            + [f"vendor={v}" for v in VENDORS]
        )

    # -- the groups ------------------------------------------------------------------------
    def settings_part(self, operator: str, settings: Mapping[str, Any]) -> list[float]:
        key = (operator, tuple(sorted(settings.items(), key=lambda kv: kv[0])))
        cached = self._cache.get(key)
        if cached is None:
            pinned = self.pin(operator, settings)
            cached = [1.0 if pinned.get(k) == v else 0.0 for k, v in self.setting_columns]
            cached += [1.0 if operator == o else 0.0 for o in self.template.operators]
            cached += [1.0 if self.template.family == f else 0.0 for f in FAMILIES]
            self._cache[key] = cached
        return cached

    def pin(self, operator: str, settings: Mapping[str, Any]) -> dict[str, Any]:
        """``settings`` with defaults for missing knobs and knobs that do not matter for ``operator``."""
        out = {}
        for knob in self.template.knobs:
            value = settings.get(knob.name, knob.default)
            out[knob.name] = value if knob.matters_for(operator) and value in knob.values else knob.default
        return out

    def shape_part(self, shape: CaseShape) -> list[float]:
        cached = self._cache.get(shape)
        if cached is None:
            numbers = shape.features()
            dtype = shape.dtype if shape.dtype in DTYPES else None
            cached = [numbers[n] for n in SHAPE_NUMBERS] + [1.0 if dtype == d else 0.0 for d in DTYPES]
            self._cache[shape] = cached
        return cached

    def hardware_part(self, hw: HardwareFacts | None) -> list[float]:
        key = ("hardware", hw.id if hw is not None else None)
        cached = self._cache.get(key)
        if cached is None:
            if hw is None:
                cached = [0.0] * (len(ISA_FLAGS) + 1 + len(CACHES) + len(VENDORS))
            else:
                isa = set(hw.isa)
                cached = [1.0 if f in isa else 0.0 for f in ISA_FLAGS]
                cached.append(_log2(hw.cores))
                cached += [_log2(hw.caches.get(c)) for c in CACHES]
                cached += [1.0 if hw.vendor == v else 0.0 for v in VENDORS]
            self._cache[key] = cached
        return cached

    # -- rows ------------------------------------------------------------------------------
    def speed_rows(
        self,
        operator: str,
        settings_list: Sequence[Mapping[str, Any]],
        shapes: Sequence[CaseShape],
        hw: HardwareFacts | None,
    ) -> np.ndarray:
        """One row per (settings, shape), settings-major: row ``i * len(shapes) + j``."""
        hw_part = self.hardware_part(hw)
        shape_parts = [self.shape_part(s) for s in shapes]
        rows = [
            self.settings_part(operator, settings) + shape_part + hw_part
            for settings in settings_list
            for shape_part in shape_parts
        ]
        return np.asarray(rows, dtype=float)

    def feasibility_rows(
        self, operator: str, settings_list: Sequence[Mapping[str, Any]], hw: HardwareFacts | None
    ) -> np.ndarray:
        hw_part = self.hardware_part(hw)
        return np.asarray([self.settings_part(operator, s) + hw_part for s in settings_list], dtype=float)
