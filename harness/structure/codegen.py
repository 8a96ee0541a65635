"""Assembling a candidate for a matched task: stage kernels, stage calls, and a ModelNew in the task's terms.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.pyparse import parse as parse_source
from harness.structure.bind import TensorBinding
from harness.structure.constructor import Constructor, ConstructorError, reuse_constructor
from harness.structure.match import Match, Stage
from harness.structure.patterns import Call, indent


class AdaptError(Exception):
    """A matched task cannot be given a candidate (the constructor cannot be reused, a stage has no call)."""


@dataclass(frozen=True)
class StageCode:
    code: str  # module-level code: kernels, tables, the stage's call function
    call: str  # the call expression in forward, e.g. "_s0_call(x, self.fc.weight.detach())"
    imports: tuple[str, ...] = ()


def split_candidate(text: str) -> tuple[str, set[str], list[str]]:
    """(module-level code other than imports, docstring and ModelNew; the names it defines; its imports)."""
    tree = parse_source(text)
    kept, names, imports = [], set(), []
    lines = text.splitlines()
    for i, node in enumerate(tree.body):
        segment = "\n".join(lines[node.lineno - 1 : node.end_lineno])
        if i == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(segment)
            continue
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            continue
        kept.append(segment)
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        for target in getattr(node, "targets", []) + ([node.target] if isinstance(node, ast.AnnAssign) else []):
            for t in ast.walk(target):
                if isinstance(t, ast.Name):
                    names.add(t.id)
    return "\n".join(kept), names, imports


def rename(code: str, names: set[str], prefix: str) -> str:
    """``code`` with the identifiers in ``names`` prefixed (strings, hence C++ sources, untouched)."""
    lines = code.splitlines(keepends=True)
    edits: list[tuple[int, int]] = []  # (row, col) of each identifier to prefix
    previous = None
    for tok in tokenize.generate_tokens(io.StringIO(code).readline):
        if tok.type == tokenize.NAME and tok.string in names and not (previous and previous.string == "."):
            edits.append(tok.start)
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            previous = tok
    for row, col in reversed(edits):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + prefix + line[col:]
    return "".join(lines)


def call_function(name: str, call: Call, names: set[str], prefix: str) -> str:
    body = rename(call.body.strip("\n") + "\n", names, prefix)
    return f"def {name}({', '.join(call.params)}):\n{indent(body)}"


def tensor_expr(binding: TensorBinding | None) -> str:
    return "None" if binding is None else binding.expr


def template_stage(
    index: int, stage: Stage, render: Callable[[str, dict[str, Any]], str], settings: dict[str, Any]
) -> StageCode:
    found = stage.found
    if found is None or found.pattern.call is None:
        raise AdaptError(
            f"template {stage.template} serves {stage.operator} only with its own ModelNew (no call for other tasks)"
        )
    call = found.pattern.call(found)
    rendered = render(stage.operator or "", settings)
    code, names, imports = split_candidate(rendered)
    prefix = f"_s{index}"
    code = rename(code, names, prefix)
    function = call_function(f"{prefix}_call", call, names, prefix)
    args = []
    for param in call.params:
        if param in stage.tensors:
            args.append(tensor_expr(stage.tensors[param]))
        elif param in found.tensors or param in found.pattern.role_order():  # an optional role left unbound
            args.append("None")
        elif param in stage.scalars:
            args.append(stage.scalars[param].expr)
        else:
            raise AdaptError(f"template {stage.template}: the call takes {param!r}, which the match does not bind")
    return StageCode(
        f"# stage {index}: {stage.template}.{stage.operator}\n{code.strip()}\n\n\n{function}",
        f"{prefix}_call({', '.join(args)})",
        tuple(imports) + tuple(f"import {m}" for m in call.imports),
    )


def forward_source(match: Match, calls: list[str]) -> str:
    lines = [f"    def forward(self, {', '.join(match.inputs)}):" if match.inputs else "    def forward(self):"]
    for stage, call in zip(match.stages, calls):
        lines.append(f"        _{stage.output} = {call}")
    structure = match.trace.first.structure

    def out(value: str) -> str:
        if value in {s.output for s in match.stages}:
            return f"_{value}"
        names = {f"in{i}": n for i, n in enumerate(match.inputs)}
        return names.get(value, f"_{value}")

    outputs = list(match.outputs)
    if structure == "tensor" or len(outputs) == 1 and not isinstance(structure, list):
        lines.append(f"        return {out(outputs[0])}")
    else:
        lines.append(f"        return ({', '.join(out(o) for o in outputs)},)")
    return "\n".join(lines) + "\n"


def constructor_for(match: Match) -> Constructor:
    from harness.task_loader import load_task_isolated

    task = load_task_isolated(match.task)  # task code runs in the sandboxed loader, never in this process
    keys = {k for c in task.cases for k in c.params}
    try:
        return reuse_constructor(task.source, keys)
    except ConstructorError as exc:
        raise AdaptError(f"the reference's constructor cannot be reused: {exc}") from None


def assemble(match: Match, stages: list[StageCode], doc: str) -> str:
    ctor = constructor_for(match)
    imports = ["import torch", "import torch.nn as nn", "", "from harness.cpu import compile_cpp"]
    extra = [i for s in stages for i in s.imports] + list(ctor.imports)
    for line in dict.fromkeys(extra):
        if line.strip() and line not in imports and not re.match(r"from harness\.cpu import compile_cpp$", line):
            imports.insert(0, line)
    body = ["class ModelNew(nn.Module):"]
    body += [line.rstrip("\n") for line in ctor.class_body]
    if ctor.init:
        body.append(ctor.init.rstrip("\n"))
        body.append("")
    body.append(forward_source(match, [s.call for s in stages]).rstrip("\n"))
    parts = [
        f'"""{doc.strip()}\n"""',
        "\n".join(dict.fromkeys(imports)).strip(),
        *[s.code.strip() for s in stages],
        *[h.strip() for h in ctor.helpers],
        "\n".join(body),
    ]
    return "\n\n\n".join(p for p in parts if p) + "\n"


def describe(match: Match, settings: dict[str, Any], template: str) -> str:
    lines = [
        f"Candidate for {match.task.rsplit('/', 1)[-1]}, rendered by the `{template}` kernel template for the traced",
        f"structure of the reference: {match.structure}.",
        "",
        "Settings: " + ", ".join(f"{k}={v}" for k, v in settings.items()),
        "",
        "Bindings (what the kernels read, and where the task keeps it):",
    ]
    for i, stage in enumerate(match.stages):
        parts = [f"{k}={v.source}:{v.name}" for k, v in stage.tensors.items()]
        parts += [f"{k}={v.expr}" for k, v in stage.scalars.items()]
        what = f"{stage.template}.{stage.operator}" if stage.kind == "template" else stage.kind
        lines.append(f"* stage {i} ({what}): " + (", ".join(parts) or "-"))
    lines.append("ModelNew's constructor is the reference's own, so parameters have the same names and shapes.")
    return "\n".join(lines)


def render_single(match: Match, render: Callable[[str, dict[str, Any]], str], settings: dict[str, Any]) -> str:
    """The candidate for a one-stage match served by a template's kernels with the task's conventions."""
    stage = match.stages[0]
    code = template_stage(0, stage, render, settings)
    return finish(assemble(match, [code], describe(match, settings, stage.template or "")))


def finish(text: str) -> str:
    """The candidate, checked by the harness's static anti-cheat rules (a finding is an AdaptError, not a cheat)."""
    from harness.static_check import check_source

    findings = check_source(text)
    if findings:
        raise AdaptError("the assembled candidate breaks the anti-cheat rules: " + "; ".join(map(str, findings[:3])))
    return text
