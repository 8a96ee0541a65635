"""Composite template for graphs of several kernels: conv -> batch norm -> relu -> pool chains, residual blocks,
a GEMM with an epilogue chain, a small CNN with a linear head.

More on it: docs/templates.md, "Template notes", templates/cpu/pipeline.
"""

from __future__ import annotations

from typing import Any

from harness.suite.cpp_kit import gemm as core
from harness.suite.cpp_kit.prelude import ISA_DOC
from harness.suite.templates.cpu import _chain

FAMILY = "block"
OPERATORS = ["cnn_stem", "residual_conv_block", "tiny_cnn"]
KNOBS = [
    {
        "name": "conv_algorithm",
        "values": ["direct", "im2col", "implicit_gemm"],
        "default": "direct",
        "layer": "algorithm",
        "doc": "convolution stages: direct taps, im2col + GEMM, or implicit GEMM (the conv templates' algorithm)",
    },
    core.knob("micro_kernel"),
    core.knob("isa", ISA_DOC),
    {
        "name": "math",
        "values": ["libm", "poly"],
        "default": "libm",
        "layer": "algorithm",
        "doc": "exp/erf/tanh in elementwise chains (and templates with a math knob): libm calls or vectorisable "
        "polynomials",
    },
    {
        "name": "block",
        "values": [16384, 4096, 65536],
        "default": 16384,
        "layer": "tiling",
        "doc": "elements per OpenMP work item of the elementwise chains",
    },
    {
        "name": "vector_width",
        "values": [256, 512],
        "default": 256,
        "layer": "instruction",
        "doc": "SIMD width the compiler prefers in the elementwise chains (and templates with that knob)",
    },
]
ALIASES = {"algorithm": "conv_algorithm"}  # a stage template's knob -> the pipeline knob that sets it


def stage_settings(template: Any, settings: dict[str, Any]) -> dict[str, Any]:
    """A stage template's settings: its defaults, with every pipeline knob it has (and allows) applied."""
    chosen = template.default_settings()
    for knob in template.knobs:
        key = ALIASES.get(knob.name, knob.name)
        if key in settings and settings[key] in knob.values:
            chosen[knob.name] = settings[key]
    return chosen


def _chain_of(stage: Any, match: Any) -> _chain.Chain:
    from harness.structure.match import same_node

    first = match.lifted[0]
    out_shapes = [same_node(first, lf, stage.output).shape for lf in match.lifted]
    full = []
    for vid in stage.tensors:
        shapes = [lf.value(_value_in(first, lf, vid)).shape for lf in match.lifted]
        full.append(all(s == o for s, o in zip(shapes, out_shapes)))
    masks = tuple(first.value(vid).dtype == "bool" for vid in stage.tensors)
    return _chain.Chain(stage.chain, list(stage.tensors), list(stage.scalars), tuple(full), masks)


def _value_in(first: Any, other: Any, vid: str) -> str:
    """The id of value ``vid`` of the first case in another case (a node output maps by position)."""
    from harness.structure.match import same_node

    if first.node(vid) is not None:
        return same_node(first, other, vid).id
    return vid


def check_chain(stage: Any, match: Any) -> str | None:
    """Why a chain stage cannot be generated (None when it can)."""
    for node in stage.chain:
        why = _chain.supported(node)
        if why:
            return why
    from harness.structure.match import same_node

    for lf in match.lifted:
        operands = {lf.value(_value_in(match.lifted[0], lf, v)).dtype for v in stage.tensors}
        dtypes = (operands - {"bool"}) | {same_node(match.lifted[0], lf, n.id).dtype for n in stage.chain}
        if len(dtypes) != 1 or not dtypes <= {"float32", "float64", "bfloat16", "float16"} or operands == {"bool"}:
            return (
                f"elementwise ops on {', '.join(sorted(operands | dtypes))} (one floating dtype per case, and bool "
                "masks, are supported)"
            )

    for lf in match.lifted:
        out = same_node(match.lifted[0], lf, stage.output).shape
        for vid in stage.tensors:
            shape = lf.value(_value_in(match.lifted[0], lf, vid)).shape
            if not _chain.block_broadcast(shape, out):
                return f"an operand of shape {list(shape)} broadcast to {list(out)} in more than one block"
    return None


def _view_call(stage: Any, match: Any) -> str:
    from harness.structure.match import flatten_dims

    node = stage.chain[0]
    operands = [stage.tensors[o.value].expr for o in node.operands if o is not None]
    x = operands[0] if operands else "None"
    args = node.attrs.get("args", ())
    if node.kind == "stack":
        return f"torch.{node.fn}([{', '.join(operands)}], dim={node.attrs.get('dim', 0)})"
    if node.fn in ("t",):
        return f"{x}.t()"
    if node.fn in ("transpose", "permute", "unsqueeze", "squeeze"):
        return f"{x}.{node.fn}({', '.join(repr(a) for a in args)})"
    dims = flatten_dims(node)
    if dims is not None:
        return f"{x}.flatten({dims[0]}, {dims[1]})"
    if node.fn == "expand":
        return f"{x}.expand({tuple(node.shape)!r})"
    return f"{x}.reshape({tuple(node.shape)!r})"


def render_match(match: Any, settings: dict[str, Any]) -> str:
    from harness.structure.codegen import (
        AdaptError,
        StageCode,
        assemble,
        call_function,
        describe,
        finish,
        template_stage,
    )
    from harness.suite.cpp_kit.candidate import module
    from harness.suite.kernel_templates import list_templates
    from harness.suite.templates.cpu._cpp_blocks import vector_pragma

    templates = {t.name: t for t in list_templates("cpu")}
    codes = []
    for i, stage in enumerate(match.stages):
        if stage.kind == "template":
            template = templates[stage.template]
            codes.append(template_stage(i, stage, template.render, stage_settings(template, settings)))
        elif stage.kind == "chain":
            why = check_chain(stage, match)
            if why:
                raise AdaptError(f"stage {i}: {why}")
            chain = _chain_of(stage, match)
            cpp = _chain.source(chain, settings)
            cpp = cpp.replace(_chain.HEADERS, _chain.HEADERS + vector_pragma(settings["vector_width"]), 1)
            text = module("chain", cpp, _chain.tables())
            from harness.structure.codegen import rename, split_candidate

            code, names, imports = split_candidate(text)
            prefix = f"_s{i}"
            call = _chain.call(chain)
            args = [stage.tensors[v].expr for v in chain.operands] + [stage.scalars[k].expr for k in chain.scalars]
            function = call_function(f"{prefix}_call", call, names, prefix)
            codes.append(
                StageCode(
                    f"# stage {i}: elementwise chain {' -> '.join(n.fn for n in chain.nodes)}\n"
                    f"{rename(code, names, prefix).strip()}\n\n\n{function}",
                    f"{prefix}_call({', '.join(args)})",
                    tuple(imports),
                )
            )
        else:
            codes.append(StageCode("", _view_call(stage, match)))
    return finish(assemble(match, codes, describe(match, settings, "pipeline")))


def render(operator: str, settings: dict) -> str:
    """A built-in block: its task is traced and matched like any other, then rendered from the match."""
    from harness.structure.match import Match, match_task
    from harness.suite import find_task
    from harness.suite.kernel_templates import TemplateError

    match = match_task(find_task(operator).path, operator)
    if not isinstance(match, Match):
        raise TemplateError(f"pipeline: the built-in task {operator} no longer matches: {match.explanation()}")
    return render_match(match, settings)
