"""The tracing worker: runs a task's reference once per case and records every aten op it dispatches.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import sys
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

SCHEMA = "kope.trace/1"
IGNORED_NAMESPACES = ("prim",)


def _jsonable_scalar(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    return value


def _plain(value: Any, depth: int = 0) -> Any:
    """A Python value as JSON, for init inputs and attributes (tensors become their shape)."""
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    if isinstance(value, float):
        return _jsonable_scalar(value)
    if isinstance(value, torch.Tensor):
        return {"tensor": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, (list, tuple)) and depth < 3:
        return [_plain(v, depth + 1) for v in value]
    return {"repr": repr(value)[:200]}


class _Values:
    """Value ids for tensors: known tensors by object identity, op results numbered in order."""

    def __init__(self) -> None:
        self.ids: dict[int, str] = {}
        self.keep: list[torch.Tensor] = []  # keeps every seen tensor alive, so ids are never reused
        self.table: dict[str, dict[str, Any]] = {}
        self.counter = 0
        self.consts = 0

    def name(self, tensor: torch.Tensor, value_id: str, kind: str, **extra: Any) -> str:
        self.ids[id(tensor)] = value_id
        self.keep.append(tensor)
        self.table[value_id] = {
            "kind": kind,
            "shape": list(tensor.shape),
            "dtype": str(tensor.dtype).removeprefix("torch."),
            "stride": list(tensor.stride()) if tensor.layout == torch.strided else None,
            "device": tensor.device.type,
            **extra,
        }
        return value_id

    def ref(self, tensor: torch.Tensor) -> str:
        known = self.ids.get(id(tensor))
        if known is not None:
            return known
        self.consts += 1
        return self.name(tensor, f"const{self.consts}", "const")

    def result(self, tensor: torch.Tensor) -> str:
        self.counter += 1
        return self.name(tensor, f"v{self.counter}", "op")


class Recorder(TorchDispatchMode):
    def __init__(self, values: _Values) -> None:
        super().__init__()
        self.values = values
        self.ops: list[dict[str, Any]] = []
        self.modules: list[str] = [""]  # the submodule whose forward is running (state-dict prefix), innermost last

    def watch(self, model: torch.nn.Module) -> None:
        """Track which submodule dispatches each op (forward pre/post hooks on every submodule)."""

        def enter(name: str) -> Any:
            def hook(_module: Any, _args: Any) -> None:  # a hook's return value would replace the inputs
                self.modules.append(name)

            return hook

        def leave(_module: Any, _args: Any, _out: Any) -> None:  # ... or the output
            self.modules.pop()

        for name, module in model.named_modules():
            module.register_forward_pre_hook(enter(name))
            module.register_forward_hook(leave)

    def encode(self, arg: Any) -> Any:
        if isinstance(arg, torch.Tensor):
            return {"t": self.values.ref(arg)}
        if isinstance(arg, (list, tuple)):
            return [self.encode(a) for a in arg]
        if isinstance(arg, torch.dtype):
            return {"dtype": str(arg).removeprefix("torch.")}
        if isinstance(arg, torch.device):
            return {"device": str(arg)}
        if isinstance(arg, (torch.memory_format, torch.layout)):
            return {"enum": str(arg)}
        if isinstance(arg, (bool, int, str)) or arg is None:
            return arg
        if isinstance(arg, float):
            return _jsonable_scalar(arg)
        return {"repr": repr(arg)[:200]}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # torch's signature
        kwargs = kwargs or {}
        namespace = func.namespace
        if namespace in IGNORED_NAMESPACES:
            return func(*args, **kwargs)
        encoded_args = self.encode(list(args))
        encoded_kwargs = {k: self.encode(v) for k, v in kwargs.items()}
        out = func(*args, **kwargs)
        flat = list(out) if isinstance(out, (list, tuple)) else [out]
        results = [self.values.result(t) if isinstance(t, torch.Tensor) else self.encode(t) for t in flat]
        self.ops.append(
            {
                "op": f"{namespace}.{func.overloadpacket.__name__}.{func._overloadname}",
                "args": encoded_args,
                "kwargs": encoded_kwargs,
                "out": results,
                "tuple": isinstance(out, (list, tuple)),
                "module": self.modules[-1],
            }
        )
        return out


def _attributes(model: torch.nn.Module, values: _Values) -> tuple[dict[str, Any], dict[str, str]]:
    scalars: dict[str, Any] = {}
    tensors: dict[str, str] = {}
    for prefix, module in model.named_modules():
        for key, value in vars(module).items():
            if key.startswith("_") or key == "training":
                continue
            path = f"{prefix}.{key}" if prefix else key
            if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
                tensors[path] = values.name(value, f"attr:{path}", "attr", path=path)
            elif isinstance(value, (bool, int, float)) or (
                isinstance(value, (tuple, list))
                and len(value) <= 8
                and all(isinstance(v, (bool, int, float)) for v in value)
            ):
                scalars[path] = _plain(value)
    return scalars, tensors


def _flatten(value: Any) -> tuple[list[Any], Any]:
    if isinstance(value, torch.Tensor):
        return [value], "tensor"
    if isinstance(value, (list, tuple)):
        leaves, shapes = [], []
        for item in value:
            sub, shape = _flatten(item)
            leaves += sub
            shapes.append(shape)
        return leaves, shapes
    return [], {"scalar": _plain(value)}


def _trace_case(module: Any, case_name: str, fake: bool) -> dict[str, Any]:
    from harness.worker_common import seed_everything

    seed_everything(0)
    init = list(module.get_init_inputs())
    seed_everything(0)
    if fake:  # parameters built on the meta device, then given (uninitialised) CPU storage: values are not read
        with torch.device("meta"):
            model = module.Model(*init)
        if isinstance(model, torch.nn.Module):
            model = model.to_empty(device="cpu")
    else:
        model = module.Model(*init)
    context = _fake_mode() if fake else _nothing()
    with context:
        seed_everything(1)
        inputs = list(module.get_inputs())
        values = _Values()
        forward_args = _forward_args(model)
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor):
                values.name(x, f"in{i}", "input", index=i)
        scalar_inputs = {i: _plain(x) for i, x in enumerate(inputs) if not isinstance(x, torch.Tensor)}
        if isinstance(model, torch.nn.Module):
            for name, p in model.named_parameters():
                values.name(p, f"param:{name}", "param", name=name)
            for name, b in model.named_buffers():
                values.name(b, f"buffer:{name}", "buffer", name=name)
            attrs, tensor_attrs = _attributes(model, values)
            training = bool(model.training)
        else:
            attrs, tensor_attrs, training = {}, {}, False
        recorder = Recorder(values)
        if isinstance(model, torch.nn.Module):
            recorder.watch(model)
        with torch.no_grad(), recorder:
            out = model(*inputs)
        leaves, structure = _flatten(out)
        outputs = [values.ref(t) for t in leaves]
    return {
        "case": case_name,
        "mode": "fake" if fake else "real",
        "init": [_plain(v) for v in init],
        "forward_args": forward_args,
        "scalar_inputs": scalar_inputs,
        "values": values.table,
        "ops": recorder.ops,
        "outputs": outputs,
        "structure": structure,
        "attrs": attrs,
        "tensor_attrs": tensor_attrs,
        "training": training,
    }


def _forward_args(model: Any) -> list[str]:
    try:
        params = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError, AttributeError):
        return []
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _fake_mode() -> Any:
    from torch._subclasses.fake_tensor import FakeTensorMode

    return FakeTensorMode(allow_non_fake_inputs=True)


def trace(path: str, max_cases: int) -> dict[str, Any]:
    from harness.task import load_task

    torch.set_num_threads(1)
    task = load_task(path)
    cases = []
    for case in task.cases[:max_cases]:
        module = task.module_for_case(case)
        errors = []
        for fake in (True, False):
            try:
                cases.append(_trace_case(module, case.name, fake))
                break
            except Exception as exc:  # the reference's own failure: try real tensors, then report it
                errors.append(f"{'fake' if fake else 'real'} tensors: {type(exc).__name__}: {str(exc)[:300]}")
                module = task.module_for_case(case)
        else:
            cases.append({"case": case.name, "error": "; ".join(errors)})
    return {
        "schema": SCHEMA,
        "task": str(task.path),
        "operator": task.operator,
        "cases_total": len(task.cases),
        "cases": cases,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.structure.trace_worker")
    parser.add_argument("tasks", nargs="+", help="task files; one JSON line per task, in order")
    parser.add_argument("--max-cases", type=int, default=16)
    args = parser.parse_args(argv)
    from harness.task import load_task  # noqa: F401  (imported before "ready": the parent's timeout is per task)

    out = os.fdopen(os.dup(1), "w")  # the protocol; what task code prints goes to stderr
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _not_dumpable()  # a task's process cannot open this one's descriptors through /proc (the protocol)
    out.write("ready\n")
    out.flush()
    for task in args.tasks:
        result = _traced_apart(task, args.max_cases, out.fileno())
        result["path"] = task
        out.write(json.dumps(result) + "\n")
        out.flush()
    return 0


def _not_dumpable() -> None:
    import ctypes

    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0


def _traced_apart(task: str, max_cases: int, protocol: int) -> dict[str, Any]:
    """``trace(task)`` in a process forked for this task alone: its code never runs in this (the worker's)
    process, so a task cannot change how a later task is traced; the result comes back through a pipe."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the task's process
        os.close(read_end)
        os.close(protocol)
        try:
            result = _trace_reported(task, max_cases)
            data = json.dumps(result).encode()
        except BaseException as exc:  # whatever happens, the parent gets one answer
            data = json.dumps({"schema": SCHEMA, "error": f"tracing failed: {type(exc).__name__}"}).encode()
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(data)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    try:
        reply: Any = json.loads(data) if data else None
    except ValueError:
        reply = None
    if not isinstance(reply, dict):
        code = os.waitstatus_to_exitcode(status)  # -N: killed by signal N, as a parent's returncode says it
        return {"schema": SCHEMA, "error": f"the tracing worker failed (exit {code}): the task's process ended first"}
    return reply


def _trace_reported(task: str, max_cases: int) -> dict[str, Any]:
    from harness.errors import HarnessError

    try:
        return trace(task, max_cases)
    except HarnessError as exc:
        return {"schema": SCHEMA, "error": exc.message}
    except Exception as exc:  # a task that breaks the tracer itself: report it, go on with the next
        return {"schema": SCHEMA, "error": f"tracing failed: {type(exc).__name__}: {str(exc)[:300]}"}


if __name__ == "__main__":
    raise SystemExit(main())
