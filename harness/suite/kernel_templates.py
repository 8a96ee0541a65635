"""Expert kernel templates: parameterised candidates for built-in operators.

A template is a Python file at ``harness/suite/templates/<target>/<name>.py`` that renders a complete candidate
file (``ModelNew``) for each operator it serves from declared knobs; every combination of allowed knob values
must render a correct candidate for every case of every operator it serves. What a template module defines
(``FAMILY``, ``OPERATORS``, ``KNOBS``, ``render``, ``PATTERNS``): docs/templates.md, "Writing a template".
Templates are trusted code shipped with KOPE: loading one imports it (they only build strings; they must not
import torch at module level).
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from harness.errors import HarnessError
from harness.vocabulary import FAMILIES, LAYERS

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"


class TemplateError(HarnessError):
    """A template file is malformed, or was asked for an operator or setting it does not have."""


@dataclass(frozen=True)
class Knob:
    name: str
    values: tuple[Any, ...]
    default: Any
    layer: str
    doc: str
    operators: tuple[str, ...] | None = None  # the operators it matters for; None: all the template serves

    def matters_for(self, operator: str) -> bool:
        return self.operators is None or operator in self.operators

    def to_dict(self) -> dict[str, Any]:
        data = {
            "name": self.name,
            "values": list(self.values),
            "default": self.default,
            "layer": self.layer,
            "doc": self.doc,
        }
        if self.operators is not None:
            data["operators"] = list(self.operators)
        return data


@dataclass(frozen=True)
class KernelTemplate:
    name: str
    family: str
    target: str
    operators: tuple[str, ...]
    knobs: tuple[Knob, ...]
    path: Path
    _render: Callable[[str, dict[str, Any]], str]
    patterns: tuple[Any, ...] = ()  # harness.structure.patterns.Pattern: the structures it computes
    _render_match: Callable[[Any, dict[str, Any]], str] | None = None  # composite templates: render(match, ...)

    def knob(self, name: str) -> Knob:
        for knob in self.knobs:
            if knob.name == name:
                return knob
        raise TemplateError(
            f"template {self.name!r} has no knob {name!r} (knobs: {', '.join(k.name for k in self.knobs)})"
        )

    def default_settings(self) -> dict[str, Any]:
        return {k.name: k.default for k in self.knobs}

    def relevant_knobs(self, operator: str) -> tuple[Knob, ...]:
        """The knobs that change ``operator``'s kernel (the others are pinned to their defaults)."""
        return tuple(k for k in self.knobs if k.matters_for(operator))

    def pinned_settings(self, operator: str, settings: dict[str, Any]) -> dict[str, Any]:
        """``settings`` completed with defaults, with every knob that does not matter for ``operator`` at its default."""
        full = self.check_settings(settings)
        return {k.name: (full[k.name] if k.matters_for(operator) else k.default) for k in self.knobs}

    def check_settings(self, settings: dict[str, Any]) -> dict[str, Any]:
        """Complete ``settings`` with defaults; unknown knobs or values not allowed are errors."""
        full = self.default_settings()
        for name, value in settings.items():
            knob = self.knob(name)
            if value not in knob.values:
                raise TemplateError(
                    f"template {self.name!r}: knob {name!r} does not allow {value!r} (allowed: {list(knob.values)})"
                )
            full[name] = value
        return full

    def render(self, operator: str, settings: dict[str, Any] | None = None) -> str:
        if operator not in self.operators:
            raise TemplateError(
                f"template {self.name!r} does not serve operator {operator!r} (it serves: {', '.join(self.operators)})"
            )
        full = self.check_settings(settings or {})
        source = self._render(operator, dict(full))
        if not isinstance(source, str) or "class ModelNew" not in source:
            raise TemplateError(f"template {self.name!r} rendered no ModelNew for {operator!r} with {full}")
        return source

    def render_task(self, match: Any, settings: dict[str, Any] | None = None) -> str:
        """The candidate for a task matched by structure (``harness.structure.match``).

        A task that is one of this template's own operators gets ``render(operator, ...)``;
        any other gets this template's kernels called with the task's own conventions
        (``harness.structure.codegen``); a composite template renders the whole match.
        Raises ``TemplateError`` when the matched task cannot be given a candidate.
        """
        from harness.structure.codegen import AdaptError, render_single

        full = self.check_settings(settings or {})
        try:
            if match.native and match.operator in self.operators:
                return self.render(match.operator, full)
            if self._render_match is not None:
                return self._render_match(match, dict(full))
            return render_single(match, self.render, full)
        except AdaptError as exc:
            raise TemplateError(f"template {self.name!r}: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "family": self.family,
            "target": self.target,
            "operators": list(self.operators),
            "knobs": [k.to_dict() for k in self.knobs],
            "path": str(self.path),
        }


def _load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"kope_template_{path.parent.name}_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise TemplateError(f"{path}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a broken template file is a packaging bug: say where
        raise TemplateError(f"{path}: importing the template failed: {type(exc).__name__}: {exc}") from None
    return module


def _parse(path: Path) -> KernelTemplate:
    module = _load_module(path)
    where = str(path)
    family = getattr(module, "FAMILY", None)
    if family not in FAMILIES:
        raise TemplateError(f"{where}: FAMILY must be one of {', '.join(FAMILIES)} (got {family!r})")
    target = getattr(module, "TARGET", path.parent.name)
    operators = getattr(module, "OPERATORS", None)
    if not isinstance(operators, (list, tuple)) or not operators or not all(isinstance(o, str) for o in operators):
        raise TemplateError(f"{where}: OPERATORS must be a non-empty list of operator names")
    render = getattr(module, "render", None)
    if not callable(render):
        raise TemplateError(f"{where}: render(operator, settings) is missing")
    knobs = []
    required = {"name", "values", "default", "layer", "doc"}
    for i, raw in enumerate(getattr(module, "KNOBS", None) or []):
        if not isinstance(raw, dict) or not required <= set(raw) <= required | {"operators"}:
            raise TemplateError(
                f"{where}: KNOBS[{i}] must have exactly name, values, default, layer, doc (and optionally operators)"
            )
        values = tuple(raw["values"])
        if not values or raw["default"] not in values:
            raise TemplateError(f"{where}: knob {raw['name']!r}: default {raw['default']!r} is not among its values")
        if raw["layer"] not in LAYERS:
            raise TemplateError(
                f"{where}: knob {raw['name']!r}: layer {raw['layer']!r} is not one of {', '.join(LAYERS)}"
            )
        json.dumps(values)  # values must be JSON scalars: they are recorded in the graph
        only = raw.get("operators")
        if only is not None:
            unknown = sorted(set(only) - set(operators)) if isinstance(only, (list, tuple)) else None
            if unknown is None or not only or unknown:
                raise TemplateError(
                    f"{where}: knob {raw['name']!r}: operators must be a non-empty list of operators the template "
                    f"serves (got {only!r})"
                )
            only = tuple(only)
        knobs.append(Knob(raw["name"], values, raw["default"], raw["layer"], str(raw["doc"]), only))
    if not knobs:
        raise TemplateError(f"{where}: KNOBS is empty; a template needs at least one knob")
    if len({k.name for k in knobs}) != len(knobs):
        raise TemplateError(f"{where}: knob names repeat")
    patterns = tuple(getattr(module, "PATTERNS", None) or ())
    for p in patterns:
        if getattr(p, "operator", None) not in operators:
            raise TemplateError(
                f"{where}: a pattern names operator {getattr(p, 'operator', p)!r}, not one of OPERATORS"
            )
    render_match = getattr(module, "render_match", None)
    return KernelTemplate(
        path.stem, family, target, tuple(operators), tuple(knobs), path, render, patterns, render_match
    )


def template_files(target: str = "cpu") -> list[Path]:
    return sorted(p for p in (TEMPLATES_DIR / target).glob("*.py") if not p.name.startswith("_"))


@functools.lru_cache(maxsize=8)
def _scan(target: str, stamp: tuple) -> tuple[KernelTemplate, ...]:
    templates = [_parse(p) for p in template_files(target)]
    served: dict[str, str] = {}
    for template in templates:
        for op in template.operators:
            if op in served:
                raise TemplateError(f"operator {op!r} is served by two templates: {served[op]} and {template.name}")
            served[op] = template.name
    return tuple(templates)


def list_templates(target: str = "cpu") -> list[KernelTemplate]:
    stamp = tuple((str(p), p.stat().st_mtime_ns) for p in template_files(target))
    return list(_scan(target, stamp))


def template_for(operator: str, target: str = "cpu") -> KernelTemplate | None:
    """The template serving ``operator`` on ``target``, or None when the suite has none."""
    for template in list_templates(target):
        if operator in template.operators:
            return template
    return None
