"""A worker's side of a timed unit: ``prepare`` (fresh inputs, caches flushed), ``go`` (the calls), ``fetch``.

The parent holds the clock: it times the ``go`` request from the outside, so nothing this process
does to its own clocks changes a measurement. ``prepare`` builds one fresh input set per seed
(``get_inputs`` under that seed) and flushes the caches (``CpuTimer.flush``: the inputs' and the
model's cache lines, and a scrub buffer); ``go`` runs the model once per input set, back to back,
and synchronises the device; ``fetch`` sends every output back (the parent compares each one
with the reference's output for the same seed). The outputs of one unit stay alive until the
next unit has run, so an implementation that hands out the same buffer again is visible.
Reference and candidate workers use this same code, so both pay exactly the same costs.
"""

from __future__ import annotations

from typing import Any

import torch

from harness.worker_common import encode, flat_tensors, make_inputs


def _no_copy(value: Any, tensors: list[torch.Tensor]) -> Any:
    """``encode`` without the defensive copy (the outputs of a unit stay untouched until it is fetched)."""
    if type(value) is torch.Tensor and value.device.type == "cpu":
        tensors.append(value.detach())
        return {"t": len(tensors) - 1, "device": str(value.device), "stride": list(value.stride())}
    if isinstance(value, (tuple, list)):
        return {"seq": [_no_copy(v, tensors) for v in value]}
    return encode(value, tensors)


class TimedCalls:
    def __init__(self, target: Any, hardware: Any) -> None:
        self.target = target
        self.hardware = hardware
        self.timer: Any = None
        self.inputs: list[list[Any]] = []
        self.seeds: list[int] = []
        self.outputs: list[Any] = []
        self.previous: list[Any] = []
        self.held: list[torch.Tensor] = []

    def prepare(self, module: Any, model_state: list[torch.Tensor], seeds: list[int], case_name: str) -> None:
        if self.timer is None:
            self.timer = self.target.timer(self.hardware)
        device = self.target.device
        self.seeds = list(seeds)
        self.inputs = [make_inputs(module, seed, device, case_name) for seed in self.seeds]
        tensors = [x for inputs in self.inputs for x in inputs if isinstance(x, torch.Tensor)]
        self.timer.flush(tensors + list(model_state))
        self.target.synchronize()

    def go(self, model: Any) -> int:
        outputs = []
        with torch.no_grad():
            for inputs in self.inputs:
                outputs.append(model(*inputs))
            self.target.synchronize()
        self.previous, self.outputs = self.outputs, outputs
        return len(outputs)

    def fetch(self) -> tuple[list[dict[str, Any]], list[torch.Tensor]]:
        tensors: list[torch.Tensor] = []
        items = [{"seed": seed, "output": _no_copy(out, tensors)} for seed, out in zip(self.seeds, self.outputs)]
        return items, tensors

    def remote(self, tensors: list[torch.Tensor]) -> list[dict[str, Any]]:
        """Where each tensor of a ``fetch`` lies in this process, for the parent to read (``harness.remote_memory``);
        the tensors (contiguous CPU copies where they were not) stay alive until the next fetch."""
        self.held = [t.detach().to("cpu").contiguous() for t in tensors]
        return [
            {
                "dtype": str(t.dtype).removeprefix("torch."),
                "shape": list(t.shape),
                "nbytes": t.numel() * t.element_size(),
                "addr": t.data_ptr(),
            }
            for t in self.held
        ]

    def reused_buffer(self) -> str | None:
        """A description of an output that shares memory with another output of this or the last unit.

        A sweep over the storages sorted by start address (n log n: a unit holds up to thousands of
        calls): a span overlaps an earlier one of another output exactly when it starts below the
        highest end seen among the other outputs, so the two highest ends of distinct outputs suffice."""
        spans = []
        for which, outs in (("this", self.outputs), ("previous", self.previous)):
            for i, out in enumerate(outs):
                for t in flat_tensors(out):
                    storage = t.untyped_storage()
                    if storage.nbytes():
                        spans.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes(), (which, i)))
        spans.sort(key=lambda span: span[0])
        top: list[tuple[int, tuple[str, int]]] = []  # (end, owner) of the highest ends, distinct owners, at most 2
        for lo, hi, owner in spans:
            for end, other in top:
                if other != owner and lo < end:
                    first, second = sorted((owner, other), key=lambda o: (o[0] != "this", o[1]))
                    return (
                        f"the output of timed call {first[1]} ({first[0]} unit) and of call {second[1]} "
                        f"({second[0]} unit) share memory"
                    )
            ends = {o: e for e, o in top}
            ends[owner] = max(hi, ends.get(owner, 0))
            top = sorted(((e, o) for o, e in ends.items()), reverse=True)[:2]
        return None
