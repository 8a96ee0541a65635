"""Matching a traced task against the templates' patterns.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.structure.bind import ScalarBinding, TensorBinding, bind_scalar, input_names, same, tensor_binding
from harness.structure.lift import lift
from harness.structure.lifted import Lifted, Node
from harness.structure.patterns import Found, Pattern, check, find
from harness.structure.tracing import Trace, trace_task

CHAIN_KINDS = ("unary", "binary")
VIEW_KINDS = ("view", "stack")
CORE_KINDS = ("matmul", "conv", "sdpa")


@dataclass
class Stage:
    kind: str  # template | chain | view
    nodes: tuple[str, ...]
    output: str
    template: str | None = None
    operator: str | None = None
    tensors: dict[str, TensorBinding] = field(default_factory=dict)
    scalars: dict[str, ScalarBinding] = field(default_factory=dict)
    static: dict[str, Any] = field(default_factory=dict)
    found: Found | None = None  # template stages: the binding on the first case
    family: str | None = None  # template stages: the family of their template
    chain: list[Node] = field(default_factory=list)  # chain / view stages: their lifted nodes, in order

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "output": self.output, "nodes": list(self.nodes)}
        if self.template:
            data["template"] = self.template
            data["operator"] = self.operator
        if self.chain:
            data["ops"] = [n.signature for n in self.chain]
        if self.tensors:
            data["tensors"] = {k: v.to_dict() for k, v in self.tensors.items()}
        if self.scalars:
            data["scalars"] = {k: v.to_dict() for k, v in self.scalars.items()}
        if self.static:
            data["static"] = {k: _json(v) for k, v in self.static.items()}
        return data


def _json(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_json(v) for v in value]
    return value


@dataclass
class Match:
    """How a task is served: the template that renders it, and every stage with its bindings."""

    task: str
    digest: str
    template: str  # the rendering template: the single stage's, or "pipeline"
    operator: str | None  # that template's operator (single-stage matches)
    native: bool  # the task is one of the template's built-in operators: its own ModelNew is used
    family: str  # inferred from the structure
    stages: list[Stage]
    inputs: list[str]  # forward parameter names
    outputs: tuple[str, ...]
    trace: Trace = field(repr=False)
    lifted: list[Lifted] = field(repr=False, default_factory=list)

    @property
    def structure(self) -> str:
        return " -> ".join(
            f"{s.template}.{s.operator}" if s.kind == "template" else f"{s.kind}({', '.join(n.fn for n in s.chain)})"
            for s in self.stages
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "template": self.template,
            "operator": self.operator,
            "native": self.native,
            "family": self.family,
            "structure": self.structure,
            "stages": [s.to_dict() for s in self.stages],
            "task_sha256": self.digest,
        }


@dataclass
class NoMatch:
    task: str
    digest: str | None
    unmatched: list[str]  # one line per op no stage covers
    reason: str = ""
    off_target: bool = False  # the reference cannot run on the target at all (inputs made on another device)

    def explanation(self) -> str:
        head = self.reason or "no kernel template computes these ops of the reference"
        return head + (": " + "; ".join(self.unmatched) if self.unmatched else "")

    def to_dict(self) -> dict[str, Any]:
        return {"matched": False, "reason": self.reason, "unmatched": self.unmatched}


@dataclass(frozen=True)
class Candidate:
    template: str
    family: str
    pattern: Pattern
    builtin: tuple[str, ...]  # the template's own operators


def _describe(node: Node, lifted: Lifted) -> str:
    ops = ", ".join(f"aten.{lifted.graph.ops[i].name}" for i in node.ops) or node.fn
    attrs = {k: v for k, v in node.attrs.items() if k not in ("rank", "in_shape", "a_shape", "b_shape")}
    detail = ", ".join(f"{k}={v}" for k, v in list(attrs.items())[:4])
    kind = node.fn if node.kind == "other" else node.signature
    return f"{kind} [{ops}]" + (f" ({detail})" if detail else "") + f" -> {list(node.shape)} {node.dtype}"


def _shape_key(lifted: Lifted) -> list[tuple[Any, ...]]:
    return [
        (n.id, n.kind, n.fn, tuple((o.value, o.transposed) if o else None for o in n.operands)) for n in lifted.nodes
    ]


def _viewable(node: Node, cases: Sequence[Lifted]) -> str | None:
    """Why a view node cannot be replayed in forward (None when it can)."""
    if node.kind == "stack":
        return None
    if node.fn in ("t", "transpose", "permute", "unsqueeze", "squeeze"):
        return None
    if node.fn in ("view", "_unsafe_view", "reshape", "flatten", "expand"):
        nodes = [same_node(cases[0], c, node.id) for c in cases]
        if _flatten_dims(node) is not None and all(_flatten_dims(n) == _flatten_dims(node) for n in nodes):
            return None
        if all(same(n.shape, node.shape) for n in nodes):
            return None
        return f"a reshape to sizes that change between cases ({node.fn})"
    return f"view op {node.fn}"


def _flatten_dims(node: Node) -> tuple[int, int] | None:
    """(start, end) when the view merges dims start..end of its input into one (like Tensor.flatten)."""
    src, dst = tuple(node.attrs.get("in_shape", ())), tuple(node.shape)
    if not src or len(dst) >= len(src):
        return None
    for start in range(len(dst)):
        end = start + len(src) - len(dst)
        merged = 1
        for s in src[start : end + 1]:
            merged *= s
        if src[:start] == dst[:start] and merged == dst[start] and src[end + 1 :] == dst[start + 1 :]:
            return start, end
    return None


def flatten_dims(node: Node) -> tuple[int, int] | None:
    return _flatten_dims(node)


def _candidates(target: str) -> list[Candidate]:
    from harness.suite.kernel_templates import list_templates

    found = []
    for template in list_templates(target):
        for p in template.patterns:
            found.append(Candidate(template.name, template.family, p, template.operators))
    return sorted(found, key=lambda c: -c.pattern.size)


def _composite_operators(target: str) -> tuple[str, ...]:
    from harness.suite.kernel_templates import list_templates

    return next((t.operators for t in list_templates(target) if t.name == "pipeline"), ())


def cover(
    lifted: Lifted, candidates: Sequence[Candidate], prefer: str | None = None
) -> tuple[list[tuple[Candidate | None, Found | None, list[Node], str]], list[str]]:
    """Stages (candidate, found, nodes, kind) in execution order, and the unmatched op descriptions."""
    covered: set[str] = set()
    stages: list[tuple[Candidate | None, Found | None, list[Node], str]] = []
    unmatched: list[str] = []
    for node in reversed(lifted.nodes):
        if node.id in covered:
            continue
        best: tuple[Candidate, Found] | None = None
        reasons: list[str] = []
        for cand in candidates:
            if best is not None and cand.pattern.size < best[1].pattern.size:
                break
            if cand.pattern.call is None and cand.pattern.operator != prefer:
                continue  # served only with the template's own ModelNew, i.e. for its own operator
            found = find(cand.pattern, lifted, node)
            if found is None or any(n in covered for n in found.nodes):
                continue
            why = check(found)
            if why is not None:
                reasons.append(f"{cand.template}.{cand.pattern.operator}: {why}")
                continue
            if best is None or (prefer and cand.pattern.operator == prefer and best[0].pattern.operator != prefer):
                best = (cand, found)
        alone = len(lifted.nodes) == 1  # a lone elementwise op is the pointwise template's; else it joins a chain
        if best is not None and not (node.kind in CHAIN_KINDS and best[1].pattern.size == 1 and not alone):
            covered.update(best[1].nodes)
            stages.append((best[0], best[1], [lifted.by_id[n] for n in best[1].nodes], "template"))
            continue
        if node.kind in CHAIN_KINDS:
            covered.add(node.id)
            stages.append((None, None, [node], "chain"))
            continue
        if node.kind in VIEW_KINDS:
            covered.add(node.id)
            stages.append((None, None, [node], "view"))
            continue
        detail = f" — {'; '.join(reasons[:2])}" if reasons else ""
        unmatched.append(_describe(node, lifted) + detail)
        covered.add(node.id)
    stages.reverse()
    return _merge_chains(stages, lifted), list(reversed(unmatched))


def _merge_chains(
    stages: list[tuple[Candidate | None, Found | None, list[Node], str]], lifted: Lifted
) -> list[tuple[Candidate | None, Found | None, list[Node], str]]:
    """Adjacent chain nodes whose intermediate results only feed the chain become one chain stage."""
    merged: list[tuple[Candidate | None, Found | None, list[Node], str]] = []
    for stage in stages:
        if stage[3] == "chain" and merged and merged[-1][3] == "chain":
            previous = merged[-1][2]
            ids = {n.id for n in previous} | {stage[2][0].id}
            escaping = [
                n for n in previous if lifted.is_output(n.id) or any(u.id not in ids for u in lifted.users(n.id))
            ]
            uses_previous = any(o is not None and o.value in {n.id for n in previous} for o in stage[2][0].operands)
            if uses_previous and not escaping:
                merged[-1] = (None, None, [*previous, stage[2][0]], "chain")
                continue
        merged.append(stage)
    return merged


def _family(stages: list[Stage]) -> str:
    """The family of a matched structure: one template stage's own; kernels around one GEMM or convolution
    are `fused` (KernelBench level 2); several such core kernels, or attention, a `block`."""
    templates = [s for s in stages if s.kind == "template"]
    core = [s for s in templates if any(n.kind in CORE_KINDS for n in s.chain)]
    if len(core) > 1 or any(n.kind == "sdpa" for s in templates for n in s.chain):
        return "block"
    if core and len(stages) > 1:
        return "fused"
    if len(templates) == 1 and len(stages) == 1:
        return templates[0].family or "unknown"
    if not templates:
        return "elementwise"
    return "fused"


def _inputs_off_cpu(trace: Trace) -> str:
    """``"in0 on cuda, ..."`` for the traced inputs of the first case that do not live on the CPU."""
    values = trace.cases[0].values if trace.cases else {}
    return ", ".join(f"{v.id} on {v.device}" for v in values.values() if v.kind == "input" and v.device != "cpu")


def match_graph(
    trace: Trace, operator: str, target: str = "cpu", *, candidates: Sequence[Candidate] | None = None
) -> Match | NoMatch:
    """Cover a traced task (see the module docstring)."""
    lifted = [lift(c) for c in trace.cases]
    first = lifted[0]
    reference_key = [(k[1], k[2]) for k in _shape_key(first)]
    for other in lifted[1:]:
        if [(k[1], k[2]) for k in _shape_key(other)] != reference_key:
            return NoMatch(
                trace.task,
                trace.digest,
                [],
                f"the reference computes different ops in case {other.graph.case!r} than in "
                f"{first.graph.case!r}, so one kernel cannot serve every case",
            )
    if target == "cpu":
        elsewhere = _inputs_off_cpu(trace)
        if elsewhere:
            return NoMatch(
                trace.task,
                trace.digest,
                [],
                f"its get_inputs() makes its inputs on another device ({elsewhere}): a GPU problem, whose "
                "reference the cpu target cannot run (use --target cuda or triton on a machine with an NVIDIA GPU)",
                off_target=True,
            )
    cands = list(candidates) if candidates is not None else _candidates(target)
    raw, unmatched = cover(first, cands, prefer=operator)
    if unmatched:
        return NoMatch(trace.task, trace.digest, unmatched)
    names = input_names(first.graph)
    stages: list[Stage] = []
    problems: list[str] = []
    for cand, found, nodes, kind in raw:
        stage = _stage(cand, found, nodes, kind, lifted, names, problems)
        if stage is not None:
            stages.append(stage)
    if problems:
        return NoMatch(trace.task, trace.digest, problems, "parts of the reference cannot be bound to the task")
    if not stages:
        return NoMatch(trace.task, trace.digest, [], "the reference computes nothing a kernel could do")
    single = len(stages) == 1 and stages[0].kind == "template"
    template = stages[0].template if single else "pipeline"
    op = stages[0].operator if single else None
    builtin = next((c.builtin for c in cands if c.template == template), ())
    native = bool(single and op == operator and operator in builtin)
    if not single and operator in _composite_operators(target):
        op = operator  # a built-in block the composite template serves by name (still rendered from this match)
    return Match(
        task=trace.task,
        digest=trace.digest,
        template=template or "pipeline",
        operator=op,
        native=native,
        family=_family(stages),
        stages=stages,
        inputs=names,
        outputs=first.outputs,
        trace=trace,
        lifted=lifted,
    )


def _module_of(lifted: Lifted, found: Found, scalar: str) -> str:
    """The module that dispatched the op a pattern's scalar was read from."""
    for step, node_id in zip(found.pattern.steps, found.nodes):
        if scalar in step.scalars:
            node = lifted.node(node_id)
            return node.module if node is not None else ""
    return ""


def same_node(first: Lifted, other: Lifted, node_id: str) -> Node:
    """The node of another case at the position ``node_id`` has in the first (cases lift to the same structure)."""
    index = next(i for i, n in enumerate(first.nodes) if n.id == node_id)
    return other.nodes[index]


def _stage(
    cand: Candidate | None,
    found: Found | None,
    nodes: list[Node],
    kind: str,
    lifted: list[Lifted],
    names: list[str],
    problems: list[str],
) -> Stage | None:
    first = lifted[0]
    cases = [lf.graph for lf in lifted]
    output = nodes[-1].id
    if kind == "template" and cand is not None and found is not None:
        bound = [find(found.pattern, lf, same_node(first, lf, output)) for lf in lifted]
        per_case = [f for f in bound if f is not None]
        if len(per_case) != len(bound):
            problems.append(f"{cand.template}.{found.pattern.operator} binds in some cases only")
            return None
        for lf, f in zip(lifted[1:], per_case[1:]):
            why = check(f)
            if why is not None:
                problems.append(f"{cand.template}.{found.pattern.operator}: in case {lf.graph.case!r}: {why}")
                return None
        static = dict(found.static)
        for f in per_case[1:]:
            for key, value in f.static.items():
                if not same(value, static.get(key)):
                    problems.append(
                        f"{cand.template}.{found.pattern.operator}: {key} changes between cases ({static.get(key)} / "
                        f"{value}), but the kernel fixes it"
                    )
        scalars: dict[str, ScalarBinding] = {}
        for name in found.scalars:
            module = _module_of(first, found, name)
            binding = bind_scalar(name, [f.scalars[name] for f in per_case], cases, names, module)
            if binding is None:
                problems.append(
                    f"{cand.template}.{found.pattern.operator}: {name} changes between cases and is neither a module "
                    "attribute nor a size of an input"
                )
                return None
            scalars[name] = binding
        tensors: dict[str, TensorBinding] = {}
        for role, operand in found.tensors.items():
            if operand is None:
                continue
            tensor = tensor_binding(role, operand.value, first.graph, names)
            if tensor is None:
                problems.append(f"{cand.template}.{found.pattern.operator}: tensor {role} is made outside the model")
                return None
            tensors[role] = tensor
        return Stage(
            "template",
            found.nodes,
            output,
            cand.template,
            found.pattern.operator,
            tensors,
            scalars,
            static,
            found,
            cand.family,
            list(nodes),
        )
    # chain / view stages: scalars are per node attribute; tensors are every external operand
    inside = {n.id for n in nodes}
    operands: dict[str, TensorBinding] = {}
    for node in nodes:
        for operand in node.operands:
            if operand is None or operand.value in inside or operand.value in operands:
                continue
            external = tensor_binding(operand.value, operand.value, first.graph, names)
            if external is None:
                problems.append(f"{node.signature}: operand {operand.value} is a tensor made outside the model")
                return None
            operands[operand.value] = external
    chain_scalars: dict[str, ScalarBinding] = {}
    for node in nodes if kind == "chain" else []:
        for attr, value in node.attrs.items():
            if attr in ("rank", "in_shape", "alpha") and not (attr == "alpha" and value != 1):
                continue
            if value is None or isinstance(value, str):
                continue
            values = [same_node(first, lf, node.id).attrs.get(attr) for lf in lifted]
            scalar = bind_scalar(attr, values, cases, names, node.module)
            if scalar is None:
                problems.append(f"{node.signature}: {attr} changes between cases and cannot be bound")
                return None
            chain_scalars[f"{node.id}.{attr}"] = scalar
    if kind == "view":
        why = _viewable(nodes[0], lifted)
        if why is not None:
            problems.append(_describe(nodes[0], first) + f": {why}")
            return None
    return Stage(kind, tuple(n.id for n in nodes), output, tensors=operands, scalars=chain_scalars, chain=list(nodes))


def match_task(
    path: str | Path, operator: str | None = None, target: str = "cpu", *, timeout: float | None = None
) -> Match | NoMatch:
    """Trace ``path`` (cached) and match it; ``operator`` is the task's operator name (for native matches)."""
    from harness.structure.tracing import DEFAULT_TIMEOUT_S
    from harness.task_loader import read_task_info

    trace = trace_task(path, timeout=timeout or DEFAULT_TIMEOUT_S)
    name = operator or read_task_info(path).operator
    if _candidates(target) or target == "cpu":
        return match_graph(trace, name, target)
    return by_builtin_operator(match_graph(trace, name, "cpu"), target)


def by_builtin_operator(match: Match | NoMatch, target: str) -> Match | NoMatch:
    """A cpu match served on a target whose templates declare no structures (``triton``).

    Such templates serve their built-in operators by name, so a task is served when its
    structure is one of those operators with the built-in task's conventions (a ``native``
    cpu match) and a template of ``target`` names that operator; anything else is a
    ``NoMatch`` that says so.
    """
    from harness.suite.kernel_templates import list_templates

    if not isinstance(match, Match):
        return match
    if match.native and match.operator:
        served = next((t for t in list_templates(target) if match.operator in t.operators), None)
        if served is not None:
            return replace(match, template=served.name, family=served.family)
    why = (
        f"its structure ({match.structure}) is not one of them with the built-in task's conventions"
        if not match.native
        else f"none of them serves {match.operator or match.template}, the operator its structure computes"
    )
    return NoMatch(
        match.task,
        match.digest,
        [],
        f"the {target} templates declare no structures: they serve their built-in operators by name, and {why}",
    )
