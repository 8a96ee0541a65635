"""The evaluation outcome: one typed record, serialised to ``kope.outcome/1`` JSON.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from harness.vocabulary import STATUSES, Status

__all__ = [
    "EXCERPT_LIMIT",
    "SCHEMA",
    "STATUSES",
    "CaseResult",
    "GpuInfo",
    "Hardware",
    "Outcome",
    "Status",
    "TimingStats",
    "excerpt",
    "geometric_mean",
]

SCHEMA = "kope.outcome/1"
EXCERPT_LIMIT = 2000  # characters of error_excerpt (excerpt() keeps the first and last lines)
HARDWARE_ID_LIMIT = 128
HARDWARE_CLASS_LIMIT = 64


def excerpt(text: str | None, limit: int = EXCERPT_LIMIT) -> str | None:
    """At most ``limit`` characters, keeping the first and last lines (the middle is elided)."""
    if text is None:
        return None
    text = text.strip("\n")
    if len(text) <= limit:
        return text
    marker = "\n[... {} characters elided ...]\n"
    room = limit - len(marker.format(len(text)))
    head = text[: room * 2 // 5]
    tail = text[len(text) - (room - len(head)) :]
    head = head[: head.rfind("\n")] if "\n" in head else head
    tail = tail[tail.find("\n") + 1 :] if "\n" in tail else tail
    return head + marker.format(len(text) - len(head) - len(tail)) + tail


@dataclass
class TimingStats:
    """Milliseconds per call over ``n`` timed repetitions."""

    median: float
    iqr: float
    cv: float
    n: int
    ci_low: float | None = None  # ~95 % confidence interval of the median (ms), where measured adaptively
    ci_high: float | None = None

    @classmethod
    def from_samples(cls, samples_ms: list[float], ci: tuple[float, float] | None = None) -> TimingStats:
        if not samples_ms:
            raise ValueError("no timing samples")
        xs = sorted(samples_ms)
        n = len(xs)
        mean = sum(xs) / n
        var = sum((x - mean) ** 2 for x in xs) / (n - 1) if n > 1 else 0.0
        return cls(
            median=_quantile(xs, 0.5),
            iqr=_quantile(xs, 0.75) - _quantile(xs, 0.25),
            cv=(math.sqrt(var) / mean) if mean > 0 else 0.0,
            n=n,
            ci_low=None if ci is None else ci[0],
            ci_high=None if ci is None else ci[1],
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> TimingStats | None:
        if data is None:
            return None
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data or f.default is not None})

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {k: v for k, v in data.items() if v is not None or k not in ("ci_low", "ci_high")}

    def violations(self, where: str) -> list[str]:
        return [
            f"{where}.{name}: must be >= 0 (got {value})"
            for name, value in asdict(self).items()
            if value is not None and value < 0
        ]


def _quantile(sorted_xs: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    pos = (len(sorted_xs) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


@dataclass
class GpuInfo:
    name: str
    compute_capability: str
    sms: int
    memory_bytes: int
    # clocks when the fingerprint was taken (NVML through torch.cuda.clock_rate / pynvml; None: not readable);
    # not part of the hardware id: a GPU's clocks move with load, power and temperature
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None


@dataclass
class Hardware:
    """The fingerprint of the machine a target runs on (``class`` is a Python keyword: ``class_``)."""

    id: str
    class_: str
    vendor: str
    arch: str
    cpu_model: str
    cores: int
    isa: list[str]
    caches: dict[str, int]  # bytes per cache level
    gpu: GpuInfo | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["class"] = data.pop("class_")
        return {k: data[k] for k in ("id", "class", "vendor", "arch", "cpu_model", "cores", "isa", "caches", "gpu")}

    def violations(self, where: str = "hardware") -> list[str]:
        problems = []
        if not 1 <= len(self.id) <= HARDWARE_ID_LIMIT:
            problems.append(f"{where}.id: must be 1-{HARDWARE_ID_LIMIT} characters")
        if not 1 <= len(self.class_) <= HARDWARE_CLASS_LIMIT:
            problems.append(f"{where}.class: must be 1-{HARDWARE_CLASS_LIMIT} characters")
        if self.cores < 0:
            problems.append(f"{where}.cores: must be >= 0 (got {self.cores})")
        return problems

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Hardware:
        gpu = data.get("gpu")
        return cls(
            id=data["id"],
            class_=data["class"],
            vendor=data["vendor"],
            arch=data["arch"],
            cpu_model=data["cpu_model"],
            cores=data["cores"],
            isa=list(data["isa"]),
            caches=dict(data["caches"]),
            gpu=GpuInfo(**gpu) if gpu else None,
        )


@dataclass
class CaseResult:
    index: int
    name: str
    params: dict[str, Any]
    passed: bool
    error: str | None = None
    ref_ms: TimingStats | None = None
    cand_ms: TimingStats | None = None
    speedup: float | None = None
    # a held-out case (final evaluation only); never stored: kope.memory.outcome's validator refuses it
    heldout: bool = field(default=False, metadata={"stored": False})
    # The physical-limit check (harness.roofline), on timed cases only: least bytes moved and FLOPs of the
    # reference, the lower bound on time they give on this machine, and bound_ms / cand_ms.median.
    min_bytes: int | None = None
    flops: int | None = None
    bound_ms: float | None = None
    roofline_fraction: float | None = None
    # The same case timed as deployed (harness.deployed.measure_deployed): ref_ms.median / cand_ms.median with
    # both in plain processes under the user's own settings; set on a final evaluation's timed cases only.
    deployed_speedup: float | None = None
    # The rule that accepted the case's outputs where the default tolerance refused them: "float64-reference" (the
    # reference's own accuracy, harness.compare.PRECISE_RULE); None: every output within the default tolerance.
    tolerance: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``heldout`` appears (as true) only on held-out cases: in-loop records never carry it, and the
        Experience Graph's strict parser refuses a record that does, so held-out results never reach a prompt.
        The roofline fields appear once the physical-limit check has filled them (timed cases)."""
        data: dict[str, Any] = {
            "index": self.index,
            "name": self.name,
            "params": self.params,
            "passed": self.passed,
            "error": self.error,
            "ref_ms": self.ref_ms.to_dict() if self.ref_ms else None,
            "cand_ms": self.cand_ms.to_dict() if self.cand_ms else None,
            "speedup": self.speedup,
        }
        if self.heldout:
            data["heldout"] = True
        if self.bound_ms is not None:
            data.update(
                min_bytes=self.min_bytes,
                flops=self.flops,
                bound_ms=self.bound_ms,
                roofline_fraction=self.roofline_fraction,
            )
        if self.deployed_speedup is not None:
            data["deployed_speedup"] = self.deployed_speedup
        if self.tolerance is not None:
            data["tolerance"] = self.tolerance
        return data

    def violations(self, where: str) -> list[str]:
        problems = [] if self.index >= 0 else [f"{where}.index: must be >= 0 (got {self.index})"]
        if self.speedup is not None and not self.speedup > 0:
            problems.append(f"{where}.speedup: must be > 0 (got {self.speedup})")
        for name, stats in (("ref_ms", self.ref_ms), ("cand_ms", self.cand_ms)):
            if stats is not None:
                problems.extend(stats.violations(f"{where}.{name}"))
        for name in ("min_bytes", "flops", "bound_ms", "roofline_fraction"):
            value = getattr(self, name)
            if value is not None and value < 0:
                problems.append(f"{where}.{name}: must be >= 0 (got {value})")
        if self.deployed_speedup is not None and not self.deployed_speedup > 0:
            problems.append(f"{where}.deployed_speedup: must be > 0 (got {self.deployed_speedup})")
        return problems

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CaseResult:
        return cls(
            index=data["index"],
            name=data["name"],
            params=dict(data["params"]),
            passed=data["passed"],
            error=data["error"],
            ref_ms=TimingStats.from_dict(data["ref_ms"]),
            cand_ms=TimingStats.from_dict(data["cand_ms"]),
            speedup=data["speedup"],
            heldout=bool(data.get("heldout", False)),
            min_bytes=data.get("min_bytes"),
            flops=data.get("flops"),
            bound_ms=data.get("bound_ms"),
            roofline_fraction=data.get("roofline_fraction"),
            deployed_speedup=data.get("deployed_speedup"),
            tolerance=data.get("tolerance"),
        )


@dataclass
class Outcome:
    """What the target said about one candidate for one task."""

    status: Status
    task: str
    family: str
    level: int | None
    target: str
    cases_total: int
    cases_passed: int
    speedup: float | None
    error_kind: str | None
    error_excerpt: str | None
    compile_time_s: float | None
    timings_valid: bool
    threads: int | None  # None when nothing ran (a format error)
    duration_s: float
    hardware: Hardware
    cases: list[CaseResult] = field(default_factory=list)
    schema: str = SCHEMA
    # The as-deployed measurement (harness.deployed.measure_deployed) of a run's best kernel: the geometric mean
    # of its cases' deployed_speedup, and why it is missing or partial (the as-deployed run's error); both None
    # on every outcome that was not measured as deployed (in-loop attempts).
    deployed_speedup: float | None = None
    deployed_error: str | None = None

    def __post_init__(self) -> None:
        self.status = Status(self.status)
        if self.error_kind is not None and self.error_kind.split(":", 1)[0] not in STATUSES:
            raise ValueError(f"error_kind {self.error_kind!r} does not start with a status")

    @property
    def ok(self) -> bool:
        return self.status is Status.CORRECT

    @classmethod
    def format_error(
        cls,
        error_kind: str,
        message: str,
        *,
        task: str,
        family: str,
        level: int | None,
        target: str,
        hardware: Hardware,
        cases: Sequence[tuple[str, Mapping[str, Any]]] = (),
    ) -> Outcome:
        """The outcome of a response with no usable candidate (nothing was compiled or run).

        ``cases`` are the task's (name, parameters); each fails with ``message``."""
        return cls(
            status=Status.FORMAT_ERROR,
            task=task,
            family=family,
            level=level,
            target=target,
            cases_total=len(cases) or 1,
            cases_passed=0,
            speedup=None,
            error_kind=error_kind,
            error_excerpt=excerpt(message),
            compile_time_s=None,
            timings_valid=False,
            threads=None,
            duration_s=0.0,
            hardware=hardware,
            cases=[CaseResult(i, name, dict(params), False, message) for i, (name, params) in enumerate(cases)],
        )

    def violations(self) -> list[str]:
        """What this record breaks of the rules its types do not say (empty: a valid record)."""
        problems = []
        for name in ("task", "target"):
            if not getattr(self, name):
                problems.append(f"{name}: must not be empty")
        for name in ("cases_total", "cases_passed", "compile_time_s", "threads", "duration_s"):
            value = getattr(self, name)
            if value is not None and value < 0:
                problems.append(f"{name}: must be >= 0 (got {value})")
        if self.cases_passed > self.cases_total:
            problems.append(f"cases_passed ({self.cases_passed}) exceeds cases_total ({self.cases_total})")
        if self.speedup is not None and not self.speedup > 0:
            problems.append(f"speedup: must be > 0 (got {self.speedup})")
        if self.deployed_speedup is not None and not self.deployed_speedup > 0:
            problems.append(f"deployed_speedup: must be > 0 (got {self.deployed_speedup})")
        if self.error_excerpt is not None and len(self.error_excerpt) > EXCERPT_LIMIT:
            problems.append(f"error_excerpt: at most {EXCERPT_LIMIT} characters (got {len(self.error_excerpt)})")
        problems.extend(self.hardware.violations())
        for i, case in enumerate(self.cases):
            problems.extend(case.violations(f"cases.{i}"))
        return problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "status": self.status.value,
            "task": self.task,
            "family": self.family,
            "level": self.level,
            "target": self.target,
            "cases_total": self.cases_total,
            "cases_passed": self.cases_passed,
            "speedup": self.speedup,
            "error_kind": self.error_kind,
            "error_excerpt": self.error_excerpt,
            "compile_time_s": self.compile_time_s,
            "timings_valid": self.timings_valid,
            "threads": self.threads,
            "duration_s": self.duration_s,
            "hardware": self.hardware.to_dict(),
            "cases": [c.to_dict() for c in self.cases],
            **(
                {"deployed_speedup": self.deployed_speedup, "deployed_error": self.deployed_error}
                if self.deployed_speedup is not None or self.deployed_error is not None
                else {}
            ),
        }

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Outcome:
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} record (schema={data.get('schema')!r})")
        return cls(
            status=Status(data["status"]),
            task=data["task"],
            family=data["family"],
            level=data["level"],
            target=data["target"],
            cases_total=data["cases_total"],
            cases_passed=data["cases_passed"],
            speedup=data["speedup"],
            error_kind=data["error_kind"],
            error_excerpt=data["error_excerpt"],
            compile_time_s=data["compile_time_s"],
            timings_valid=data["timings_valid"],
            threads=data["threads"],
            duration_s=data["duration_s"],
            hardware=Hardware.from_dict(data["hardware"]),
            cases=[CaseResult.from_dict(c) for c in data["cases"]],
            deployed_speedup=data.get("deployed_speedup"),
            deployed_error=data.get("deployed_error"),
        )

    @classmethod
    def from_json(cls, text: str) -> Outcome:
        return cls.from_dict(json.loads(text))


def geometric_mean(values: Sequence[float | None]) -> float | None:
    good = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not good:
        return None
    return math.exp(sum(math.log(v) for v in good) / len(good))
