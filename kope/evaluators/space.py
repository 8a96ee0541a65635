"""Recorded search spaces: one ``kope.space/1`` JSON file per (operator, kernel template).

``kope bench record-space`` writes them (``kope.bench.record_space``); the replay evaluator
(``kope.evaluators.replay``) answers proposals from them. A file holds:

* ``schema`` (``kope.space/1``), the ``operator`` (the task's name), its ``family`` and
  ``level``, the ``template`` and the operator it renders the task as (``served_as``),
  the ``target`` and the ``task_sha256`` of the task file it was recorded on;
* ``hardware``: the fingerprint of the machine that measured it (``kope.outcome/1``'s);
* ``harness``: the options every setting was evaluated with (the case names, the timing
  budget, correctness seeds, the harness version);
* ``design``: how the settings were chosen (``grid``, or ``one-knob+sample``: the defaults,
  every single-knob change from them and a seeded random sample up to ``max_settings``),
  the relevant knobs and the planned settings in order;
* ``settings``: one entry per evaluated setting, in the order evaluated: the knob
  ``settings`` (every knob, those that do not matter for the operator at their defaults),
  the ``kernel`` hash of the rendered candidate, and the ``outcome``: the fields of the
  ``kope.outcome/1`` record the harness returned that are not the file's own (status,
  speedup, per-case results and times, ...). ``file.outcome(entry)`` rebuilds the record.
  A setting measured again (``kope.bench.record_space``: its reference time was off the
  space's median) keeps the earlier measurements' speedups in ``remeasured``. A setting
  confirmed as the space's optimum (measured again, ``--confirm``) has ``confirmed``: how many
  measurements its outcome is the median of; the others' speedups are in ``remeasured``
  (``"confirm": true``).

Files are written whole and atomically (a temporary file, then ``os.replace``), so an
interrupted recording leaves the last complete file behind.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kope.boundary import SCHEMA, Hardware, Outcome
from kope.errors import UsageError

SPACE_SCHEMA = "kope.space/1"
SUFFIX = ".space.json"
# the outcome fields a space file keeps once, for the whole file (not per setting)
FILE_FIELDS = ("schema", "task", "family", "level", "target", "hardware")


def settings_key(settings: Mapping[str, Any]) -> str:
    """The identity of a setting (the same text as the tuner's ``settings_key``)."""
    return json.dumps(dict(settings), sort_keys=True)


class SpaceFileError(UsageError):
    """A space file or folder that cannot be read."""


@dataclass
class SpaceFile:
    operator: str
    family: str
    level: int | None
    template: str
    served_as: str
    target: str
    task_sha256: str
    hardware: Hardware
    harness: dict[str, Any]
    design: dict[str, Any]
    settings: list[dict[str, Any]] = field(default_factory=list)
    path: Path | None = None

    @staticmethod
    def file_name(operator: str, template: str) -> str:
        return f"{operator}.{template}{SUFFIX}"

    @property
    def cases(self) -> tuple[str, ...]:
        return tuple(self.harness["cases"])

    def done(self) -> set[str]:
        return {settings_key(e["settings"]) for e in self.settings}

    def entry(self, settings: Mapping[str, Any]) -> dict[str, Any] | None:
        key = settings_key(settings)
        return next((e for e in self.settings if settings_key(e["settings"]) == key), None)

    def add(self, settings: Mapping[str, Any], kernel: str, outcome: Outcome) -> dict[str, Any]:
        entry = {"settings": dict(settings), "kernel": kernel, "outcome": _stored(outcome)}
        self.settings.append(entry)
        return entry

    def remeasured(self, entry: dict[str, Any], outcome: Outcome, why: Mapping[str, Any], keep: bool) -> None:
        """``entry`` measured again. ``keep``: ``outcome`` becomes its outcome and the one it had is summed up in the
        entry's ``remeasured`` list (its speedup and ``why``, e.g. how far its reference time was off); else only
        ``outcome`` is summed up there."""
        dropped = {"speedup": (entry["outcome"] if keep else outcome.to_dict()).get("speedup"), **why}
        entry.setdefault("remeasured", []).append(dropped)
        if keep:
            entry["outcome"] = _stored(outcome)

    def confirmed(self, entry: dict[str, Any], outcomes: list[Outcome]) -> dict[str, Any]:
        """``entry`` measured again ``len(outcomes)`` times: its outcome becomes the measurement with the median
        speedup of all of them (the lower median of an even number; a failed measurement counts 0), the others are
        summed up in ``remeasured`` and ``confirmed`` says how many there were. The outcome kept, as stored."""
        measured: list[dict[str, Any]] = [entry["outcome"], *(_stored(o) for o in outcomes)]
        order = sorted(range(len(measured)), key=lambda i: _speedup(measured[i]))
        keep = order[(len(measured) - 1) // 2]
        entry.setdefault("remeasured", []).extend(
            {"speedup": m.get("speedup"), "confirm": True} for i, m in enumerate(measured) if i != keep
        )
        entry["outcome"] = measured[keep]
        entry["confirmed"] = len(measured)
        return measured[keep]

    def outcome(self, entry: Mapping[str, Any]) -> Outcome:
        """The ``kope.outcome/1`` record the harness returned for ``entry``: its stored part and the file's own
        (``FILE_FIELDS``, kept once per file)."""
        shared = (SCHEMA, self.operator, self.family, self.level, self.target, self.hardware.to_dict())
        return Outcome.from_dict({**dict(zip(FILE_FIELDS, shared, strict=True)), **entry["outcome"]})

    def ranked(self) -> list[dict[str, Any]]:
        """The entries of correct settings with a speedup, fastest first."""
        correct = [e for e in self.settings if e["outcome"]["status"] == "correct" and e["outcome"].get("speedup")]
        return sorted(correct, key=lambda e: -e["outcome"]["speedup"])

    def optimum(self) -> float | None:
        """The best speedup of a correct setting in the space (None: none is correct)."""
        ranked = self.ranked()
        return ranked[0]["outcome"]["speedup"] if ranked else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SPACE_SCHEMA,
            "operator": self.operator,
            "family": self.family,
            "level": self.level,
            "template": self.template,
            "served_as": self.served_as,
            "target": self.target,
            "task_sha256": self.task_sha256,
            "hardware": self.hardware.to_dict(),
            "harness": self.harness,
            "design": self.design,
            "settings": self.settings,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: Path | None = None) -> SpaceFile:
        where = str(path) if path else "space file"
        if data.get("schema") != SPACE_SCHEMA:
            raise SpaceFileError(f"{where} is not a {SPACE_SCHEMA} file (schema={data.get('schema')!r})")
        try:
            space = cls(
                operator=str(data["operator"]),
                family=str(data["family"]),
                level=data["level"],
                template=str(data["template"]),
                served_as=str(data["served_as"]),
                target=str(data["target"]),
                task_sha256=str(data["task_sha256"]),
                hardware=Hardware.from_dict(data["hardware"]),
                harness=dict(data["harness"]),
                design=dict(data["design"]),
                settings=[dict(e) for e in data["settings"]],
                path=path,
            )
            for entry in space.settings:
                space.outcome(entry)  # every entry rebuilds a valid record
            tuple(space.harness["cases"])
        except (KeyError, TypeError, ValueError) as exc:
            raise SpaceFileError(f"{where} is not a valid {SPACE_SCHEMA} file: {type(exc).__name__}: {exc}") from None
        return space

    @classmethod
    def read(cls, path: Path) -> SpaceFile:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SpaceFileError(f"cannot read space file {path}: {exc}") from None
        if not isinstance(data, dict):
            raise SpaceFileError(f"{path} is not a {SPACE_SCHEMA} file")
        return cls.from_dict(data, path)

    def write(self, path: Path) -> None:
        """Write the whole file atomically (readers and a resumed recording never see half a file)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n"
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)  # a data file like any other (mkstemp makes it private)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self.path = path


def _speedup(stored: Mapping[str, Any]) -> float:
    return float(stored.get("speedup") or 0.0) if stored.get("status") == "correct" else 0.0


def _stored(outcome: Outcome) -> dict[str, Any]:
    return {k: v for k, v in outcome.to_dict().items() if k not in FILE_FIELDS}


def read_spaces(folder: Path) -> list[SpaceFile]:
    """Every space file in ``folder`` (sorted by name); an error when there is none or one is broken."""
    if not folder.is_dir():
        raise SpaceFileError(
            f"no such folder of recorded spaces: {folder}", hint="record one with `kope bench record-space`"
        )
    files = sorted(folder.glob(f"*{SUFFIX}"))
    if not files:
        raise SpaceFileError(
            f"{folder} holds no recorded spaces (*{SUFFIX})", hint="record them with `kope bench record-space`"
        )
    return [SpaceFile.read(f) for f in files]
