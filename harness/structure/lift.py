"""Lifting: from the aten log of one case to a graph of semantic ops (``harness.structure.lifted``).

docs/harness.md, "Module notes".
"""

from __future__ import annotations

from typing import Any

from harness.structure.graph import VIEW_OPS, CaseGraph, Op, Ref
from harness.structure.lifted import Lifted, Node, Operand

UNARY = {
    "relu": "relu",
    "gelu": "gelu",
    "sigmoid": "sigmoid",
    "tanh": "tanh",
    "silu": "silu",
    "hardswish": "hardswish",
    "hardsigmoid": "hardsigmoid",
    "mish": "mish",
    "exp": "exp",
    "log": "log",
    "abs": "abs",
    "neg": "neg",
    "sqrt": "sqrt",
    "rsqrt": "rsqrt",
    "reciprocal": "reciprocal",
    "erf": "erf",
    "log1p": "log1p",
    "expm1": "expm1",
    "softplus": "softplus",
    "leaky_relu": "leaky_relu",
    "elu": "elu",
    "hardtanh": "clamp",
    "clamp": "clamp",
    "clamp_min": "clamp",
    "clamp_max": "clamp",
    "relu6": "clamp",
    "sin": "sin",
    "cos": "cos",
    "sign": "sign",
    "square": "square",
    "pow": "pow",
}
BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div", "rsub": "rsub", "maximum": "max", "minimum": "min"}
REDUCE = {
    "sum": "sum",
    "mean": "mean",
    "amax": "max",
    "amin": "min",
    "max": "max",
    "min": "min",
    "argmax": "argmax",
    "argmin": "argmin",
    "prod": "prod",
    "linalg_vector_norm": "norm",
    "logsumexp": "logsumexp",
}
MATMUL_OPS = ("mm", "bmm", "mv", "addmm", "baddbmm", "addmv")


def _operand(value: str | None) -> Operand | None:
    return Operand(value) if value is not None else None


def _one(dims: tuple[int, ...] | None) -> int | tuple[int, ...] | None:
    """A single reduced dim as an int (how a task usually keeps it: ``self.dim = 1``), else the tuple."""
    return dims[0] if dims is not None and len(dims) == 1 else dims


def _norm_dim(dim: int, rank: int) -> int:
    return dim % rank if rank else 0


class _Lifter:
    def __init__(self, graph: CaseGraph) -> None:
        self.g = graph
        self.nodes: list[Node] = []
        self.absorbed: set[int] = set()
        self.rename: dict[str, str] = {}  # value id -> the value it stands for (absorbed expands)
        self.pending: dict[int, Node] = {}  # op index -> the node that folds a decomposition ending there

    # -- helpers ------------------------------------------------------------------------------
    def shape(self, vid: str) -> tuple[int, ...]:
        return self.g.values[vid].shape

    def tensor(self, a: Any) -> str:
        """The value id of a tensor argument (renamed through absorbed ops)."""
        if not isinstance(a, Ref):
            raise TypeError(f"expected a tensor argument, got {a!r}")
        return self.rename.get(a.id, a.id)

    def ref(self, a: Any) -> str | None:
        return self.rename.get(a.id, a.id) if isinstance(a, Ref) else None

    def view_chain(self, vid: str) -> tuple[str, list[Op]]:
        """Walk back through view ops from ``vid``: (base value, the view ops base -> vid in order)."""
        chain: list[Op] = []
        while True:
            op = self.g.producer(vid)
            if op is None or op.name not in VIEW_OPS or not op.args or not isinstance(op.args[0], Ref):
                return vid, list(reversed(chain))
            chain.append(op)
            vid = op.args[0].id

    def single_use(self, vid: str) -> bool:
        return len(self.g.consumers(vid)) <= 1 and vid not in self.g.outputs

    def add(self, node: Node) -> None:
        self.nodes.append(node)

    # -- matmul ----------------------------------------------------------------------------
    def _logical(self, vid: str) -> list[tuple[Operand, list[Op], tuple[int, ...]]]:
        """Readings of a matmul operand through its view chain, furthest base first.

        A reading keeps only the transposes of the last two dims; reshapes and expands between
        the base and the operand are torch.matmul's batching plumbing (the caller checks the
        shapes). The walk stops at any other view (a permute of other dims), whose result is
        then a base of its own.
        """
        base, chain = self.view_chain(vid)
        readings = []
        for start in range(len(chain) + 1):
            suffix = chain[start:]
            first = suffix[0].args[0].id if suffix else vid
            shape = list(self.shape(first))
            transposed, ok = False, True
            for op in suffix:
                rank = len(shape)
                if op.name == "t" or op.name == "transpose" or op.name == "permute":
                    if op.name == "transpose":
                        dims = sorted((_norm_dim(int(op.args[1]), rank), _norm_dim(int(op.args[2]), rank)))
                        swap = dims == [rank - 2, rank - 1]
                    elif op.name == "permute":
                        order = [_norm_dim(int(d), rank) for d in op.args[1]]
                        if order == list(range(rank)):
                            continue
                        swap = rank >= 2 and order == [*range(rank - 2), rank - 1, rank - 2]
                    else:
                        swap = rank == 2
                    if not swap:
                        ok = False
                        break
                    shape[-1], shape[-2] = shape[-2], shape[-1]
                    transposed = not transposed
                else:  # view / _unsafe_view / reshape / expand / unsqueeze / squeeze: batching plumbing
                    after = list(self.shape(op.out[0]))
                    if transposed and after[-2:] != shape[-2:]:  # it reshapes the transposed matrix itself
                        ok = False
                        break
                    shape = after
            if ok:
                readings.append((Operand(self.rename.get(first, first), transposed), suffix, tuple(shape)))
        return readings

    def _plain_shape(self, operand: Operand, _reading_shape: tuple[int, ...]) -> tuple[int, ...]:
        """The logical operand's shape: the base's shape, last two dims swapped when transposed."""
        shape = list(self.shape(operand.value))
        if operand.transposed:
            shape[-1], shape[-2] = shape[-2], shape[-1]
        return tuple(shape)

    @staticmethod
    def _matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
        """torch.matmul's result shape (None when the shapes do not multiply)."""
        if not a or not b:
            return None
        if len(a) == 1 and len(b) == 1:
            return () if a[0] == b[0] else None
        if len(b) == 1:
            return a[:-1] if a[-1] == b[0] else None
        if len(a) == 1:
            return (*b[:-2], b[-1]) if a[0] == b[-2] else None
        if a[-1] != b[-2]:
            return None
        batch_a, batch_b = a[:-2], b[:-2]
        n = max(len(batch_a), len(batch_b))
        batch_a = (1,) * (n - len(batch_a)) + batch_a
        batch_b = (1,) * (n - len(batch_b)) + batch_b
        batch = []
        for x, y in zip(batch_a, batch_b):
            if x != y and 1 not in (x, y):
                return None
            batch.append(max(x, y))
        return (*batch, a[-2], b[-1])

    def matmul(self, op: Op) -> bool:
        if op.name in ("addmm", "addmv", "baddbmm"):
            bias, a, b = op.args[0], op.args[1], op.args[2]
            if float(op.kwargs.get("beta", 1)) != 1 or float(op.kwargs.get("alpha", 1)) != 1:
                return False
        else:
            bias, a, b = None, op.args[0], op.args[1]
        out = op.out[0]
        users = self.g.consumers(out)
        finals: list[tuple[str, list[Op]]] = [(out, [])]
        if len(users) == 1 and users[0].name in ("_unsafe_view", "view") and out not in self.g.outputs:
            finals.insert(0, (users[0].out[0], [users[0]]))  # reshaped back (N-D matmul, linear)
        chosen = None
        for oa, chain_a, shape_a in self._logical(a.id):
            for ob, chain_b, shape_b in self._logical(b.id):
                expected = self._matmul_shape(self._plain_shape(oa, shape_a), self._plain_shape(ob, shape_b))
                for final, tail in finals:
                    if expected is not None and tuple(self.shape(final)) == expected:
                        chosen = (oa, chain_a, shape_a, ob, chain_b, shape_b, final, tail, expected)
                        break
                if chosen:
                    break
            if chosen:
                break
        if chosen is None:
            return False
        oa, chain_a, shape_a, ob, chain_b, shape_b, final, tail, expected = chosen
        bias_operand = None
        if bias is not None:
            bvid = self.tensor(bias)
            bshape = self.shape(bvid)
            n = expected[-1] if expected else 1
            if bshape not in ((n,), (1, n)) and bshape != expected:
                return False
            bias_operand = Operand(bvid)
        covered = [op.index, *(t.index for t in tail)]
        for chain in (chain_a, chain_b):
            for v in chain:
                if all(self.single_use(o) for o in v.out):
                    covered.append(v.index)
        self.absorbed.update(covered)
        self.pending[op.index] = Node(
            final,
            "matmul",
            "matmul",
            [oa, ob, bias_operand],
            {"a_shape": self._plain_shape(oa, shape_a), "b_shape": self._plain_shape(ob, shape_b)},
            tuple(self.shape(final)),
            self.g.values[final].dtype,
            tuple(sorted(covered)),
        )
        return True

    # -- instance norm ---------------------------------------------------------------------
    def instance_norm(self, op: Op) -> bool:
        """repeat(w, [N]) ... view(x, [1, N*C, ...]) -> batch_norm(training) -> view back to x's shape."""
        x_view = self.tensor(op.args[0])
        producer = self.g.producer(x_view)
        if producer is None or producer.name != "view" or not bool(op.arg(5, "training")):
            return False
        x = producer.args[0].id
        xs, vs = self.shape(x), self.shape(x_view)
        if len(xs) < 3 or vs[0] != 1 or vs[1] != xs[0] * xs[1] or vs[2:] != xs[2:]:
            return False
        users = self.g.consumers(op.out[0])
        if len(users) != 1 or users[0].name != "view" or self.shape(users[0].out[0]) != xs:
            return False
        covered = [producer.index, op.index, users[0].index]
        operands: list[Operand | None] = [Operand(x)]
        for arg in (op.args[1], op.args[2]):
            if arg is None:
                operands.append(None)
                continue
            rep = self.g.producer(arg.id)
            if rep is None or rep.name != "repeat":
                return False
            covered.append(rep.index)
            operands.append(Operand(rep.args[0].id))
        self.absorbed.update(covered)
        final = users[0].out[0]
        self.pending[op.index] = Node(
            final,
            "instance_norm",
            "instance_norm",
            operands,
            {"eps": op.arg(7, "eps"), "momentum": op.arg(6, "momentum")},
            xs,
            self.g.values[final].dtype,
            tuple(sorted(covered)),
        )
        return True

    # -- one op ------------------------------------------------------------------------------
    def single(self, op: Op) -> None:
        name = op.name[:-1] if op.name.endswith("_") and op.name[:-1] in {**UNARY, **BINARY} else op.name
        if not op.out:
            return
        out: str = op.out[0]
        shape, dtype = tuple(self.shape(out)), self.g.values[out].dtype
        x = self.ref(op.args[0]) if op.args else None

        def node(kind: str, fn: str, operands: list[Operand | None], **attrs: Any) -> None:
            self.add(Node(out, kind, fn, operands, attrs, shape, dtype, (op.index,)))

        if name in UNARY and x is not None and op.overload not in ("Tensor", "Tensor_Tensor"):
            fn = UNARY[name]
            attrs: dict[str, Any] = {}
            if name == "gelu":
                attrs["approximate"] = op.kwargs.get("approximate", "none")
                fn = "gelu" if attrs["approximate"] == "none" else "gelu_tanh"
            elif name == "leaky_relu":
                attrs["negative_slope"] = op.arg(1, "negative_slope", 0.01)
            elif name == "elu":
                attrs.update(alpha=op.arg(1, "alpha", 1.0), scale=op.arg(2, "scale", 1.0))
                attrs["input_scale"] = op.arg(3, "input_scale", 1.0)
            elif name in ("hardtanh", "relu6"):
                attrs.update(min=op.arg(1, "min_val", -1.0 if name == "hardtanh" else 0.0))
                attrs["max"] = op.arg(2, "max_val", 1.0 if name == "hardtanh" else 6.0)
            elif name == "clamp":
                attrs.update(min=op.arg(1, "min"), max=op.arg(2, "max"))
            elif name == "clamp_min":
                attrs.update(min=op.arg(1, "min"), max=None)
            elif name == "clamp_max":
                attrs.update(min=None, max=op.arg(1, "max"))
            elif name == "softplus":
                attrs.update(beta=op.arg(1, "beta", 1.0), threshold=op.arg(2, "threshold", 20.0))
            elif name == "pow":
                exponent = op.arg(1, "exponent")
                if isinstance(exponent, Ref):
                    node("other", op.qualified, [_operand(x)])
                    return
                attrs["exponent"] = exponent
                if exponent == 2:
                    fn = "square"
            node("unary", fn, [_operand(x)], **attrs)
            return
        if name in BINARY and len(op.args) >= 2:
            a, b = op.args[0], op.args[1]
            operands: list[Operand | None] = []
            scalar = None
            for arg in (a, b):
                if isinstance(arg, Ref):
                    operands.append(Operand(self.rename.get(arg.id, arg.id)))
                elif isinstance(arg, (int, float)) and not isinstance(arg, bool):
                    operands.append(None)
                    scalar = float(arg)
                else:
                    node("other", op.qualified, [Operand(r) for r in op.tensor_args()])
                    return
            if op.kwargs.get("rounding_mode") is not None:
                node("other", op.qualified, [o for o in operands if o is not None])
                return
            attrs = {"alpha": op.kwargs.get("alpha", 1)}
            if scalar is not None:
                attrs["scalar"] = scalar
            node("binary", BINARY[name], operands, **attrs)
            return
        if name in REDUCE and x is not None:
            fn = REDUCE[name]
            rank = len(self.shape(x))
            keepdim = False
            dims: tuple[int, ...] | None
            if name in ("argmax", "argmin"):
                dim = op.arg(1, "dim")
                dims = None if dim is None else (int(dim),)
                keepdim = bool(op.arg(2, "keepdim", False))
            elif name in ("max", "min") and op.overload == "dim":
                dims = (int(op.arg(1, "dim")),)
                keepdim = bool(op.arg(2, "keepdim", False))
                out = op.out[0]  # values; indices (out[1]) are a second result
            elif name == "linalg_vector_norm":
                dims_arg = op.arg(2, "dim")
                dims = None if dims_arg is None else tuple(int(d) for d in dims_arg)
                keepdim = bool(op.arg(3, "keepdim", False))
                node(
                    "reduce",
                    fn,
                    [_operand(x)],
                    dims=dims,
                    dim=_one(dims),
                    keepdim=keepdim,
                    ord=op.arg(1, "ord", 2),
                    rank=rank,
                )
                return
            elif name in ("max", "min", "sum", "mean", "prod") and op.overload == "default":
                dims, keepdim = None, False
            else:
                dims_arg = op.arg(1, "dim")
                if isinstance(dims_arg, int):
                    dims_arg = (dims_arg,)
                dims = None if dims_arg is None else tuple(int(d) for d in dims_arg)
                keepdim = bool(op.arg(2, "keepdim", False))
            if op.kwargs.get("dtype") is not None:
                node("other", op.qualified, [_operand(x)])
                return
            node("reduce", fn, [_operand(x)], dims=dims, dim=_one(dims), keepdim=keepdim, rank=rank)
            return
        if name in ("_softmax", "_log_softmax", "_safe_softmax", "softmax", "log_softmax") and x is not None:
            log = "log" in name
            node("softmax", "log_softmax" if log else "softmax", [_operand(x)], dim=int(op.arg(1, "dim")))
            return
        if name in ("cumsum", "cumprod") and x is not None:
            if op.kwargs.get("dtype") is not None:
                node("other", op.qualified, [_operand(x)])
                return
            node("cumsum", name, [_operand(x)], dim=int(op.arg(1, "dim")))
            return
        if name == "native_layer_norm":
            w, b = op.args[2], op.args[3]
            node(
                "layer_norm",
                "layer_norm",
                [
                    _operand(x),
                    Operand(w.id) if isinstance(w, Ref) else None,
                    Operand(b.id) if isinstance(b, Ref) else None,
                ],
                normalized_shape=tuple(op.args[1]),
                eps=op.arg(4, "eps"),
            )
            return
        if name in ("native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training"):
            args = list(op.args)
            if name == "_native_batch_norm_legit_no_training":
                args = [*args[:5], False, *args[5:]]
            w, b, rm, rv = args[1], args[2], args[3], args[4]
            training = bool(args[5])
            node(
                "batch_norm",
                "batch_norm",
                [_operand(x), *(Operand(t.id) if isinstance(t, Ref) else None for t in (w, b, rm, rv))],
                training=training,
                momentum=args[6],
                eps=args[7],
            )
            return
        if name == "native_group_norm":
            w, b = op.args[1], op.args[2]
            node(
                "group_norm",
                "group_norm",
                [
                    _operand(x),
                    Operand(w.id) if isinstance(w, Ref) else None,
                    Operand(b.id) if isinstance(b, Ref) else None,
                ],
                groups=int(op.args[6]),
                eps=op.args[7],
            )
            return
        if name == "convolution":
            w, b = op.args[1], op.args[2]
            node(
                "conv",
                "conv_transpose" if op.args[6] else "conv",
                [_operand(x), Operand(w.id), Operand(b.id) if isinstance(b, Ref) else None],
                stride=tuple(op.args[3]),
                padding=tuple(op.args[4]),
                dilation=tuple(op.args[5]),
                output_padding=tuple(op.args[7]),
                groups=int(op.args[8]),
                spatial=len(self.shape(self.tensor(op.args[0]))) - 2,
            )
            return
        if name in ("max_pool2d_with_indices", "max_pool2d", "max_pool1d", "max_pool3d_with_indices"):
            kernel = tuple(op.arg(1, "kernel_size"))
            stride = tuple(op.arg(2, "stride", ()) or ()) or kernel
            node(
                "max_pool",
                name.replace("_with_indices", ""),
                [_operand(x)],
                kernel=kernel,
                stride=stride,
                padding=tuple(op.arg(3, "padding", (0,) * len(kernel))),
                dilation=tuple(op.arg(4, "dilation", (1,) * len(kernel))),
                ceil_mode=bool(op.arg(5, "ceil_mode", False)),
            )
            return
        if name in ("avg_pool2d", "avg_pool1d", "avg_pool3d"):
            kernel = tuple(op.arg(1, "kernel_size"))
            stride = tuple(op.arg(2, "stride", ()) or ()) or kernel
            node(
                "avg_pool",
                name,
                [_operand(x)],
                kernel=kernel,
                stride=stride,
                padding=tuple(op.arg(3, "padding", (0,) * len(kernel))),
                ceil_mode=bool(op.arg(4, "ceil_mode", False)),
                count_include_pad=bool(op.arg(5, "count_include_pad", True)),
                divisor_override=op.arg(6, "divisor_override"),
            )
            return
        if name in ("_adaptive_avg_pool2d", "adaptive_avg_pool2d", "_adaptive_avg_pool3d"):
            node("adaptive_avg_pool", name.lstrip("_"), [_operand(x)], output_size=tuple(op.args[1]))
            return
        if name.startswith("_scaled_dot_product"):
            q, k, v = (self.tensor(a) for a in op.args[:3])
            node(
                "sdpa",
                "sdpa",
                [Operand(q), Operand(k), Operand(v)],
                causal=bool(op.arg(4, "is_causal", False)),
                dropout=op.arg(3, "dropout_p", 0.0),
                scale=op.kwargs.get("scale"),
                mask=op.kwargs.get("attn_mask") is not None,
            )
            return
        if name in VIEW_OPS and x is not None:
            if name == "expand" and self._broadcast_only(op):
                self.rename[out] = self.rename.get(x, x)
                return
            attrs = {"args": tuple(op.args[1:]), "in_shape": tuple(self.shape(x))}
            node("view", name, [_operand(x)], **attrs)
            return
        if name in ("stack", "cat") and op.args and isinstance(op.args[0], tuple):
            operands = [Operand(self.rename.get(r.id, r.id)) for r in op.args[0] if isinstance(r, Ref)]
            node("stack", name, operands, dim=int(op.arg(1, "dim", 0)))
            return
        if name == "native_dropout" and float(op.arg(1, "p", 0.0)) == 0.0 and x is not None:
            self.rename[out] = x
            return
        node("other", op.qualified, [Operand(r) for r in op.tensor_args()])

    def _broadcast_only(self, op: Op) -> bool:
        """An expand whose every user is an elementwise binary op (where broadcasting does the same)."""
        users = self.g.consumers(op.out[0])
        return bool(users) and all(u.name.rstrip("_") in BINARY for u in users) and op.out[0] not in self.g.outputs

    def run(self) -> Lifted:
        for op in self.g.ops:  # decompositions first, so the ops they absorb are not lifted on their own
            if op.name in MATMUL_OPS:
                self.matmul(op)
            elif op.name == "native_batch_norm":
                self.instance_norm(op)
        for op in self.g.ops:
            if op.index in self.pending:
                self.add(self.pending[op.index])
            elif op.index not in self.absorbed:
                self.single(op)
        outputs = tuple(self.rename.get(o, o) for o in self.g.outputs)
        return Lifted(self.g, _live(self.nodes, outputs), outputs)


def _live(nodes: list[Node], outputs: tuple[str, ...]) -> list[Node]:
    """Nodes whose results reach an output (a view left behind by an absorbed decomposition does not)."""
    live = set(outputs)
    kept = []
    for node in reversed(nodes):
        if node.id in live:
            kept.append(node)
            live.update(o.value for o in node.operands if o is not None)
    return list(reversed(kept))


def lift(graph: CaseGraph) -> Lifted:
    """The semantic op graph of one traced case (see the module docstring)."""
    return _Lifter(graph).run()
