"""What goes over the wire to a remote evaluation (a worker service or a Ray task), and back.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from harness import errors
from harness.errors import HarnessError, OptionsError

REQUEST_SCHEMA: Literal["kope.eval-request/1"] = "kope.eval-request/1"
MAX_TIMEOUT_S = 3600.0  # no single phase of a remote evaluation may be given more than an hour
MAX_SOURCE_BYTES = 4 << 20  # one task or candidate file; the worker service caps whole requests too

# Environment variables that look like credentials: never inherited by an evaluation's processes
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION_ID", re.IGNORECASE)

_FILE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}\.py$")
_LEVEL_FOLDER = re.compile(r"^level[_-]?[1-4]$", re.IGNORECASE)


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WireOptions(_Wire):
    """The evaluation options a client may set (``EvalOptions`` less the evaluating host's own switches)."""

    target: str = "cpu"
    cases: str | list[int | str] | None = None
    seeds: int = Field(default=3, ge=1, le=100)
    threads: int | None = Field(default=None, ge=1, le=4096)
    timing: bool = True
    time_incorrect: bool = False
    budget: dict[str, float] = Field(default_factory=dict)  # harness.timing.Budget fields
    compile_timeout_s: float = Field(default=300.0, gt=0, le=MAX_TIMEOUT_S)
    startup_timeout_s: float = Field(default=120.0, gt=0, le=MAX_TIMEOUT_S)
    case_timeout_s: float = Field(default=120.0, gt=0, le=MAX_TIMEOUT_S)
    timing_timeout_s: float = Field(default=180.0, gt=0, le=MAX_TIMEOUT_S)
    seed: int | None = None

    @classmethod
    def from_eval_options(cls, options: Any) -> WireOptions:
        """The wire form of ``options``; options that only the evaluating host may set must be their defaults."""
        from harness.evaluate import EvalOptions

        default = EvalOptions()
        for name in ("static_checks", "lazy_check", "limits", "sandbox"):
            if getattr(options, name) != getattr(default, name):
                raise OptionsError(
                    f"{name} is the evaluating host's setting and cannot be sent to a remote evaluation",
                    hint="evaluate locally (--evaluator local) to change it",
                )
        cases = options.cases
        if cases is not None and not isinstance(cases, str):
            cases = list(cases)
        budget = {k: float(v) for k, v in asdict(options.budget).items()}
        return cls(**{name: getattr(options, name) for name in _SAME_NAMED}, cases=cases, budget=budget)

    def to_eval_options(self) -> Any:
        from harness.evaluate import EvalOptions
        from harness.timing import Budget

        known = {f.name: f.type for f in fields(Budget)}
        unknown = sorted(set(self.budget) - set(known))
        if unknown:
            raise OptionsError(f"unknown timing budget field(s) {', '.join(unknown)} (known: {', '.join(known)})")
        defaults = asdict(Budget())
        budget = Budget(**{k: type(defaults[k])(v) for k, v in self.budget.items()})
        return EvalOptions(**{name: getattr(self, name) for name in _SAME_NAMED}, cases=self.cases, budget=budget)


# the fields a WireOptions and an EvalOptions share under the same name and type
_SAME_NAMED = [name for name in WireOptions.model_fields if name not in ("cases", "budget")]


class TaskFile(_Wire):
    name: str  # the file name (its stem is the operator when the task names none)
    level_folder: str | None = None  # the ``level<N>`` folder the task's level comes from, if any
    source: str = Field(max_length=MAX_SOURCE_BYTES)
    sha256: str

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _FILE_NAME.match(value):
            raise ValueError(f"must be a plain .py file name (got {value!r})")
        return value

    @field_validator("level_folder")
    @classmethod
    def _check_folder(cls, value: str | None) -> str | None:
        if value is not None and not _LEVEL_FOLDER.match(value):
            raise ValueError(f"must be a level<N> folder name, N from 1 to 4 (got {value!r})")
        return value

    @model_validator(mode="after")
    def _check_digest(self) -> TaskFile:
        if sha256_text(self.source) != self.sha256:
            raise ValueError("the task source does not match its sha256 (corrupted or altered in transit)")
        return self


class CandidateFile(_Wire):
    name: str
    source: str = Field(max_length=MAX_SOURCE_BYTES)

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not _FILE_NAME.match(value):
            raise ValueError(f"must be a plain .py file name (got {value!r})")
        return value


class EvalRequest(_Wire):
    schema_: Literal["kope.eval-request/1"] = Field(default=REQUEST_SCHEMA, alias="schema")
    task: TaskFile
    candidate: CandidateFile
    options: WireOptions

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    def to_payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)

    @classmethod
    def from_payload(cls, payload: Any) -> EvalRequest:
        """Parse a request; a malformed one is an ``OptionsError`` naming the first problem."""
        try:
            return cls.model_validate(payload)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "request"
            more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
            raise OptionsError(f"bad evaluation request: {where}: {first['msg']}{more}") from None


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _level_folder(path: Path) -> str | None:
    for part in reversed(path.resolve().parts[:-1]):
        if _LEVEL_FOLDER.match(part):
            return part
    return None


def request_for(task_path: str | Path, candidate_path: str | Path, options: Any) -> EvalRequest:
    """The request for evaluating ``candidate_path`` against the task file ``task_path`` with ``options``."""
    task_path, candidate_path = Path(task_path), Path(candidate_path)
    try:
        task_source = task_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise errors.TaskNotFoundError(f"cannot read task file {task_path}: {exc}") from None
    try:
        candidate_source = candidate_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise errors.CandidateNotFoundError(f"cannot read candidate {candidate_path}: {exc}") from None
    for what, text in (("task file", task_source), ("candidate", candidate_source)):
        if len(text.encode("utf-8")) > MAX_SOURCE_BYTES:
            raise OptionsError(f"the {what} is larger than {MAX_SOURCE_BYTES >> 20} MiB: too large to send")
    try:
        return EvalRequest(
            task=TaskFile(
                name=task_path.name,
                level_folder=_level_folder(task_path),
                source=task_source,
                sha256=sha256_text(task_source),
            ),
            candidate=CandidateFile(name=candidate_path.name, source=candidate_source),
            options=WireOptions.from_eval_options(options),
        )
    except ValidationError as exc:
        raise OptionsError(f"cannot send this evaluation: {exc.errors()[0]['msg']}") from None


def materialize_task(task: TaskFile, root: Path) -> Path:
    """The task file under ``root/tasks/<sha256>/``: written once, so its path and mtime stay the same."""
    folder = root / "tasks" / task.sha256[:32]
    if task.level_folder:
        folder = folder / task.level_folder
    path = folder / task.name
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".tmp", delete=False, encoding="utf-8") as handle:
            handle.write(task.source)
        Path(handle.name).replace(path)
    return path


def run_request(request: EvalRequest, root: Path) -> Any:
    """Evaluate ``request`` with ``root`` as the scratch folder; the Outcome, or a ``HarnessError``."""
    from harness.evaluate import evaluate
    from harness.task_loader import load_task_isolated

    root.mkdir(parents=True, exist_ok=True)
    options = request.options.to_eval_options()
    # The task is another client's code: imported in a sandboxed worker under the task timeout, never in this
    # (long-lived) process, where it could patch what the next request is compared with.
    # Other clients' tasks and candidates under ``root`` are hidden from it.
    task = load_task_isolated(materialize_task(request.task, root), private=(root,))
    scratch = Path(tempfile.mkdtemp(prefix="eval-", dir=root))
    try:
        candidate = scratch / request.candidate.name
        candidate.write_text(request.candidate.source, encoding="utf-8")
        return evaluate(task, candidate, options)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def error_payload(exc: HarnessError) -> dict[str, Any]:
    return {"type": type(exc).__name__, "message": exc.message, "hint": exc.hint}


def error_from_payload(data: dict[str, Any]) -> HarnessError:
    """The harness error a remote evaluation reported, as its own type (``HarnessError`` if unknown)."""
    cls = getattr(errors, str(data.get("type")), None)
    if not (isinstance(cls, type) and issubclass(cls, HarnessError)):
        cls = HarnessError
    return cls(str(data.get("message", "the remote evaluation failed")), hint=data.get("hint"))


def scrub_secrets(environ: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """``environ`` without the variables whose names look like credentials (``KOPE_WORKER_KEY``,
    ``*_API_KEY``, ``*_TOKEN``, ``*PASSWORD*``, ...): what an evaluation on a shared host may inherit."""
    return {k: v for k, v in environ.items() if not _SECRET_NAME.search(k)}


def default_root() -> Path:
    """Scratch folder for remote evaluations on this host (task files by content, one folder per candidate)."""
    from harness.commands import cache_root

    return cache_root() / "remote"


def evaluate_payload(payload: dict[str, Any], root: str | None = None) -> dict[str, Any]:
    """One remote evaluation as plain data: ``{"outcome": kope.outcome/1}`` or ``{"error": {...}}``."""
    try:
        request = EvalRequest.from_payload(payload)
        outcome = run_request(request, Path(root) if root else default_root())
    except HarnessError as exc:
        return {"error": error_payload(exc)}
    return {"outcome": outcome.to_dict()}


def evaluate_on_cluster(payload: dict[str, Any]) -> dict[str, Any]:
    """``evaluate_payload`` as a Ray task: the Ray worker process first drops the variables that look like
    credentials (Ray's own ``RAY_*`` settings stay), so the candidate's processes cannot inherit them."""
    for name in [k for k in os.environ if _SECRET_NAME.search(k) and not k.startswith("RAY_")]:
        os.environ.pop(name, None)
    return evaluate_payload(payload)


def hardware_payload(target: str) -> dict[str, Any]:
    """The fingerprint of what ``target`` runs on here (the GPU for triton/cuda when there is one)."""
    from harness import hardware

    if target in ("triton", "cuda"):
        try:
            return hardware.gpu_fingerprint().to_dict()
        except Exception as exc:  # torch raises several kinds when no GPU is visible
            if target == "cuda":
                raise errors.TargetUnavailableError(
                    f"the cuda target needs an NVIDIA GPU, and none is visible here ({type(exc).__name__})"
                ) from None
    return hardware.cpu_fingerprint().to_dict()
