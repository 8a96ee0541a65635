"""What both workers do the same way: seeding, inputs, model construction, output encoding.

Both workers derive everything from seeds the parent chooses, so the
candidate's inputs are bit-identical to the reference's (checked by digest)
without ever shipping the reference's outputs to the candidate's process.
"""

from __future__ import annotations

import random
import sys
from types import ModuleType
from typing import Any

import torch

from harness.errors import ReferenceFailedError


def seed_everything(seed: int) -> None:
    """Seed Python's, torch's and (when loaded) numpy's generators for one trial's inputs.

    torch's CPU generator is seeded directly: ``torch.manual_seed`` gives it the same state but also
    queues seeding every accelerator backend, which costs ~175 us a call here, and timing seeds every
    call of a unit (thousands per case). CUDA's generators are seeded once CUDA is initialized (a
    GPU worker initializes it before generating any inputs)."""
    random.seed(seed)
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed % (2**32))


def _seeded_list(module: ModuleType, name: str, seed: int, case_name: str) -> list[Any] | tuple[Any, ...]:
    """The task's ``name()`` (``get_inputs``, ``get_init_inputs``) under ``seed``: a list, or ``ReferenceFailedError``."""
    seed_everything(seed)
    try:
        value = getattr(module, name)()
    except Exception as exc:
        raise ReferenceFailedError(f"case {case_name!r}: {name}() raised {type(exc).__name__}: {exc}") from None
    if not isinstance(value, (list, tuple)):
        raise ReferenceFailedError(f"case {case_name!r}: {name}() must return a list, returned {type(value).__name__}")
    return value


def make_inputs(module: ModuleType, seed: int, device: str, case_name: str = "") -> list[Any]:
    inputs = _seeded_list(module, "get_inputs", seed, case_name)
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]


def init_inputs(module: ModuleType, init_seed: int, case_name: str = "") -> list[Any]:
    return list(_seeded_list(module, "get_init_inputs", init_seed, case_name))


def build(cls: type, init: list[Any], init_seed: int, device: str) -> torch.nn.Module:
    """Construct under the init seed (KernelBench: same seed -> same parameters) and move to the device."""
    seed_everything(init_seed)
    model = cls(*init)
    return model.to(device) if isinstance(model, torch.nn.Module) else model


def build_reference(
    module: ModuleType, init: list[Any], init_seed: int, device: str, case_name: str = ""
) -> torch.nn.Module:
    try:
        return build(module.Model, init, init_seed, device)
    except Exception as exc:
        raise ReferenceFailedError(
            f"case {case_name!r}: Model(*get_init_inputs()) raised {type(exc).__name__}: {exc}"
        ) from None


def model_tensors(model: Any) -> list[torch.Tensor]:
    if not isinstance(model, torch.nn.Module):
        return []
    return [t for t in list(model.parameters()) + list(model.buffers()) if isinstance(t, torch.Tensor)]


def encode(value: Any, tensors: list[torch.Tensor]) -> Any:
    """A JSON description of an output; tensors are appended to ``tensors`` (moved to the CPU)."""
    if type(value) is torch.Tensor:
        tensors.append(value.detach().to("cpu", copy=True))
        # the bytes travel contiguous: the layout the worker saw goes along (harness.compare.compare_layout)
        return {"t": len(tensors) - 1, "device": str(value.device), "stride": list(value.stride())}
    if isinstance(value, torch.Tensor):
        return {"other": f"tensor subclass {type(value).__name__}"}
    if isinstance(value, (tuple, list)):
        return {"seq": [encode(v, tensors) for v in value]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"v": value}
    return {"other": type(value).__name__}


class Other:
    """A value the parent cannot compare (an unknown type in the output)."""

    def __init__(self, description: str) -> None:
        self.description = description

    def __repr__(self) -> str:
        return f"<{self.description}>"


def decode(
    desc: Any, tensors: list[torch.Tensor], devices: list[str] | None = None, strides: list | None = None
) -> Any:
    """Parent side: rebuild an output from ``encode``'s description (devices and strides collected in order)."""
    if not isinstance(desc, dict):
        return Other("malformed output description")
    if "t" in desc:
        index = desc["t"]
        if not isinstance(index, int) or not 0 <= index < len(tensors):
            return Other("malformed tensor reference")
        if devices is not None:
            devices.append(str(desc.get("device", "cpu")))
        if strides is not None:
            stride = desc.get("stride")
            ok = isinstance(stride, list) and all(isinstance(s, int) and not isinstance(s, bool) for s in stride)
            strides.append(stride if ok else None)
        return tensors[index]
    if "seq" in desc and isinstance(desc["seq"], list):
        return tuple(decode(d, tensors, devices, strides) for d in desc["seq"])
    if "v" in desc:
        return desc["v"]
    return Other(str(desc.get("other", "unknown value")))


def flat_tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in flat_tensors(v)]
    return []
