"""Index outputs checked for self-consistency (argmax / argmin / top-k style), as CANN Bench does.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

from typing import Any

KEYS = {"output", "input", "dim", "values", "keepdim"}


def problems(value: Any, module_globals: dict[str, Any] | None, where: str) -> list[str]:
    """What is wrong with an ``INDEX_OUTPUTS`` declaration (empty: nothing)."""
    if not isinstance(value, (list, tuple)) or not value:
        return [f"INDEX_OUTPUTS{where} must be a non-empty list of dicts"]
    found = []
    for i, spec in enumerate(value):
        at = f"INDEX_OUTPUTS[{i}]{where}"
        if not isinstance(spec, dict):
            found.append(f"{at} must be a dict like {{'output': 0, 'input': 0, 'dim': 1}}")
            continue
        unknown = sorted(set(spec) - KEYS)
        if unknown:
            found.append(f"{at} has unknown key(s) {', '.join(map(repr, unknown))}; keys are {', '.join(sorted(KEYS))}")
        for key in ("output", "input"):
            if not _index(spec.get(key)):
                found.append(f"{at} needs {key!r}: a position (integer >= 0), found {spec.get(key)!r}")
        if "values" in spec and (not _index(spec["values"]) or spec["values"] == spec.get("output")):
            found.append(f"{at} 'values' must be the position of another output, found {spec['values']!r}")
        if "keepdim" in spec and not isinstance(spec["keepdim"], bool):
            found.append(f"{at} 'keepdim' must be true or false")
        dim = spec.get("dim")
        if isinstance(dim, str):
            if module_globals is not None and dim not in module_globals:
                found.append(f"{at} 'dim' names {dim!r}, which is not a module-level name of the task")
        elif isinstance(dim, bool) or not isinstance(dim, int):
            found.append(f"{at} needs 'dim': an integer or the name of a module-level constant, found {dim!r}")
    return found


def _index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def resolve(module: Any, specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The declaration for one case: ``dim`` names replaced by the case's values."""
    out = []
    for spec in specs:
        dim = getattr(module, spec["dim"]) if isinstance(spec["dim"], str) else spec["dim"]
        out.append({**spec, "dim": int(dim), "keepdim": bool(spec.get("keepdim", False))})
    return out


def check(cand: list[Any], ref: list[Any], inputs: list[Any], specs: list[dict[str, Any]]) -> tuple[str, str] | None:
    """(kind, message) for the first inconsistent index output; None when all are consistent."""
    import torch

    for spec in specs:
        pos, source = spec["output"], inputs[spec["input"]] if spec["input"] < len(inputs) else None
        label = f"output[{pos}]" if len(ref) > 1 else "output"
        if not isinstance(source, torch.Tensor) or pos >= len(cand) or pos >= len(ref):
            return "incorrect:structure", f"{label}: the declared index output or its input is missing"
        c, r = cand[pos], ref[pos]
        dim = spec["dim"] % max(1, source.dim())
        size = source.shape[dim]
        if bool(((c < 0) | (c >= size)).any()):
            bad = int(((c < 0) | (c >= size)).sum())
            return (
                "incorrect:index",
                f"{label}: {bad} index value(s) outside 0..{size - 1} (dimension {dim} of input {spec['input']})",
            )
        got, want = _gather(source, c, dim, spec["keepdim"]), _gather(source, r, dim, spec["keepdim"])
        values = spec.get("values")
        if values is not None:
            claimed = cand[values] if values < len(cand) else None
            if (
                not isinstance(claimed, torch.Tensor)
                or claimed.shape != got.shape
                or not _same(got, claimed.to(got.dtype))
            ):
                return (
                    "incorrect:index",
                    f"{label}: the input values at the returned indices differ from the values returned in output[{values}]",
                )
        if not _same(got, want):
            mismatch = int((~_equal(got, want)).sum())
            return (
                "incorrect:index",
                f"{label}: {mismatch} index value(s) point at input values other than the reference's indices do "
                "(ties may break either way; the values must match)",
            )
    return None


def _gather(source: Any, index: Any, dim: int, keepdim: bool) -> Any:
    import torch

    idx = index.to(torch.int64)
    if not keepdim:
        idx = idx.unsqueeze(dim)
    shape = list(source.shape)
    shape[dim] = idx.shape[dim]
    if list(idx.shape) != shape:  # broadcast over the other dimensions is not an index output
        idx = idx.expand(shape)
    out = torch.gather(source, dim, idx)
    return out if keepdim else out.squeeze(dim)


def _equal(a: Any, b: Any) -> Any:
    import torch

    same = a == b
    if a.is_floating_point():
        same |= torch.isnan(a) & torch.isnan(b)
    return same


def _same(a: Any, b: Any) -> bool:
    return a.shape == b.shape and bool(_equal(a, b).all())


def index_extras(task: Any, module: Any, inputs: list[Any], tensors: list[Any]) -> dict[str, Any]:
    """What a reference trial carries for a task with index outputs: the resolved declaration and the inputs."""
    specs = getattr(task, "index_outputs", None)
    if not specs:
        return {}
    from harness.worker_common import encode

    return {"index_outputs": resolve(module, specs), "inputs": encode(list(inputs), tensors)}
