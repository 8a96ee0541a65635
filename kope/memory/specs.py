"""What callers hand to the memory: a run to start, an attempt to record.

These are the inputs of ``ExperienceGraph.start_run`` and ``record_attempt``
(the loop builds them; the journal stores them as JSON and replays them). They
validate on construction, so a bad value is one ``InvalidRecordError`` before
anything is written.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    InstanceOf,
    PlainSerializer,
    PrivateAttr,
    ValidationError,
    field_validator,
)

from kope.boundary import EXCERPT_LIMIT
from kope.memory import ids
from kope.memory.errors import InvalidRecordError
from kope.memory.outcome import HardwareField, OutcomeField
from kope.memory.params import DecisionParams

Tier = Literal["hot", "warm", "cold"]
ParamsField = Annotated[
    InstanceOf[DecisionParams],
    BeforeValidator(lambda value: value if isinstance(value, DecisionParams) else DecisionParams.from_json(value)),
    PlainSerializer(lambda params: params.to_json()),
]
EvidenceKind = Literal["decision", "insight", "knowledge"]
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def parse(cls, data: Any) -> Self:
        if isinstance(data, cls):
            return data
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or cls.__name__
            more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
            raise InvalidRecordError(f"invalid {cls.__name__}: {where}: {first['msg']}{more}") from None


def _name(value: str, what: str) -> str:
    if not _NAME.match(value):
        raise ValueError(f"{what} must be 1-128 letters, digits, '_', '.', '-' (got {value!r})")
    return value


class TaskSpec(_Spec):
    """A task: operator + target + case set (the case names, or the case dicts)."""

    operator: str
    target: str
    family: str = "unknown"
    level: int | None = None
    cases: tuple[Any, ...] = ()
    # case name -> shape/dtype key (kope.memory.shapes); not part of the task's identity
    shapes: dict[str, str] | None = None

    @field_validator("operator", "target", "family")
    @classmethod
    def _check(cls, value: str) -> str:
        return _name(value, "operator, target and family")

    @property
    def id(self) -> str:
        return ids.task_id(self.operator, self.target, list(self.cases))


class RunSpec(_Spec):
    """One optimization session of one task on one machine."""

    task: TaskSpec
    hardware: HardwareField
    run_id: str = Field(default_factory=ids.new_run_id)
    proposer: str = "unknown"
    model: str | None = None
    context_policy: str = "active"
    memory_enabled: bool = True
    budgets: dict[str, float | int | None] = Field(default_factory=dict)
    started_at: float = Field(default_factory=time.time)

    @field_validator("run_id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        ids.check_local_id(value, "run id")
        return value

    def content(self) -> dict[str, Any]:
        """Everything that identifies the run (the started_at stamp excluded; case shapes only when known, so a
        run journaled before shapes were recorded keeps its identity)."""
        exclude: dict[str, Any] = {"started_at": True}
        if self.task.shapes is None:
            exclude["task"] = {"shapes"}
        return self.model_dump(mode="json", by_alias=True, exclude=exclude)


class UsedItem(_Spec):
    """One piece of evidence that was in the prompt: becomes a USED edge."""

    kind: EvidenceKind
    id: str
    tier: Tier
    rank: int = Field(ge=0)
    tokens: int = Field(ge=0)


class Attempt(_Spec):
    """One attempt: the decision the proposer made and the outcome the target reported."""

    run_id: str
    step: int = Field(ge=0, le=1_000_000)
    title: str = Field(min_length=1, max_length=300)
    layer: str = "other"
    thought: str = Field(default="", max_length=20_000)
    parent_id: str | None = None
    code: str | None = None
    outcome: OutcomeField
    used: tuple[UsedItem, ...] = ()
    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)
    # The loop's facts (backtracked, cited) and the proposer's own (e.g. the offline
    # proposer's template and knob settings); stored as params_json (see kope.memory.params).
    params: ParamsField = Field(default_factory=DecisionParams)
    created_at: float = Field(default_factory=time.time)
    # the outcome was answered from a recorded search space (``--evaluator replay:DIR``), not measured now;
    # stored as the Outcome node's ``replayed`` property, left out of the JSON (and the content hash) when false
    replayed: bool = False
    _hash: str | None = PrivateAttr(default=None)
    _json: dict[str, Any] | None = PrivateAttr(default=None)

    @field_validator("layer")
    @classmethod
    def _layer(cls, value: str) -> str:
        layer = re.sub(r"[\s\-]+", "_", value.strip().lower())
        if not re.fullmatch(r"[a-z][a-z0-9_]{0,47}", layer):
            raise ValueError(f"optimization layer must be a short snake_case word (got {value!r})")
        return layer

    @field_validator("run_id", "parent_id")
    @classmethod
    def _ids(cls, value: str | None) -> str | None:
        if value is not None:
            ids.check_local_id(value, "run or decision id")
        return value

    @property
    def id(self) -> str:
        return ids.decision_id(self.run_id, self.step)

    def content_hash(self) -> str:
        """Identity of the attempt's content (the created_at stamp excluded)."""
        if self._hash is None:
            data = {k: v for k, v in self.to_json().items() if k != "created_at"}
            self._hash = ids.content_hash(data, 32)
        return self._hash

    def to_json(self) -> dict[str, Any]:
        """The attempt as JSON-ready data (computed once; do not modify the result)."""
        if self._json is None:
            self._json = self.model_dump(mode="json", by_alias=True, exclude=None if self.replayed else {"replayed"})
        return self._json


class KnowledgeDoc(_Spec):
    """A cold-tier document (``kope/knowledge/*.md``): the one definition, used by the context (selection and
    the prompt's cold tier, ``kope.context.knowledge`` loads and validates the files) and by the memory (a
    Knowledge node that prompts cite through USED edges).

    Only ``knowledge_data`` (id, title, text, targets, families) is journaled, sent and stored; ``layers`` and
    ``hardware`` select and rank it for a step, ``path`` is the file it was read from."""

    id: str
    title: str
    text: str  # the Markdown body
    targets: tuple[str, ...] = ()
    families: tuple[str, ...] = ()  # ("all",) or families; () = none named (documents stored by older clients)
    layers: tuple[str, ...] = ()
    hardware: tuple[str, ...] = ()  # hardware-class prefixes; () = any hardware
    path: Path | None = Field(default=None, exclude=True)  # the file it was read from; not sent or stored

    STORED: ClassVar[tuple[str, ...]] = ("id", "title", "text", "targets", "families")  # what a client sends

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        ids.check_local_id(value, "knowledge id")
        return value

    def matches_hardware(self, hardware_class: str) -> bool:
        """True when one of this doc's prefixes matches ``hardware_class`` on a '-' boundary."""
        return any(hardware_class == p or hardware_class.startswith(p + "-") for p in self.hardware)


class DeployedFigures(_Spec):
    """The as-deployed measurement of a run's best kernel (``kope.boundary.measure_deployed``: its ``best.py``
    timed against PyTorch in plain processes under the user's own settings), added to the Outcome of the
    decision that produced it once the run has ended: ``deployed_speedup`` (the geometric mean over the cases
    timed as deployed), ``deployed_error`` (why it is missing or partial) and, per case, ``deployed_speedup`` in
    ``cases_json``. Journaled (kind ``deployed``) before the store writes it; a later measurement of the same
    decision replaces an earlier one."""

    run_id: str
    decision_id: str
    speedup: float | None = Field(default=None, gt=0)
    error: str | None = Field(default=None, max_length=EXCERPT_LIMIT)
    cases: dict[str, Annotated[float, Field(gt=0)] | None] = Field(default_factory=dict, max_length=100_000)
    measured_at: float = Field(default_factory=time.time, gt=0)

    @field_validator("run_id", "decision_id")
    @classmethod
    def _ids(cls, value: str) -> str:
        try:
            return ids.check_local_id(value, "run or decision id")
        except InvalidRecordError as exc:  # named with its field by ``parse``
            raise ValueError(exc.message) from None

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json")
