"""The reference's outputs recomputed in float64, for the tolerance rule on a low-precision mismatch.

docs/harness.md, "The reference's own accuracy": when a float32/float16/bfloat16 output misses the default rule,
``harness.compare`` asks for the reference's output on that seed in float64. It is computed by a reference worker
of its own, booted on the first such question (the timing worker's pipe may hold a request in flight; not from the
warm pool, whose booting workers are stopped while timing), never in the candidate's process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from harness import ipc
from harness.compare import Precise, flatten
from harness.errors import HarnessError
from harness.remote_memory import gather
from harness.task import Case
from harness.worker_common import decode
from harness.worker_limits import WorkerError
from harness.worker_process import Worker


class PreciseReference:
    """One evaluation's float64 reference: its worker (booted when first asked) and the trials it computed."""

    def __init__(
        self,
        boot: Callable[[], Worker],
        init_seeds: dict[int, int],
        timeout_s: float,
        trace: Callable[[str], None],
    ) -> None:
        self.boot, self.init_seeds, self.timeout_s, self.trace = boot, init_seeds, timeout_s, trace
        self.worker: Worker | None = None
        self.trials: dict[tuple[int, int], tuple[dict, list] | None] = {}

    def outputs(self, case: Case, seed: int, desc: Any = None, blocks: Any = None) -> Precise:
        """The float64 outputs for ``seed``, flattened as ``harness.compare`` compares them (``blocks``: only the
        elements of the timed output's blocks that were read, ``desc`` the reference item's output description
        naming its tensors), computed when first called; [] when they cannot be (the default verdict stands)."""

        def computed() -> list[Any]:
            found = self._trial(case, seed)
            if found is None:
                return []
            trial, tensors = found
            flat = flatten(decode(trial["output"], tensors))
            if blocks is None:
                return flat
            slots = tensor_slots(desc)
            if len(slots) != len(flat):
                return []
            return [
                gather(t, blocks[k]) if isinstance(t, torch.Tensor) and k is not None and k < len(blocks) else t
                for t, k in zip(flat, slots)
            ]

        return computed

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    def _trial(self, case: Case, seed: int) -> tuple[dict, list] | None:
        key = (case.index, seed)
        if key in self.trials:
            return self.trials[key]
        found: tuple[dict, list] | None = None
        try:
            if self.worker is None:
                self.worker = self.boot()
            self.worker.send(
                ipc.Reference(case=case.index, init_seed=self.init_seeds[case.index], seeds=[seed], precise=True)
            )
            reply, tensors = self.worker.receive(self.timeout_s, f"the reference in float64 (case {case.name!r})")
            trials = ipc.split_trials(ipc.expect(reply, ipc.Trials).trials, tensors)
            found = trials[0] if len(trials) == 1 else None
        except (WorkerError, HarnessError) as exc:
            self.trace(f"case {case.name}: no float64 reference for seed {seed}: {exc}")
            self.close()
        self.trials[key] = found
        self.trace(f"case {case.name}: float64 reference for seed {seed}: {'computed' if found else 'none'}")
        return found


def tensor_slots(desc: Any) -> list[int | None]:
    """The tensor index of each leaf of an output description (``worker_common.encode``), None for a non-tensor
    leaf: in the order ``flatten(decode(desc, ...))`` lists them."""
    if isinstance(desc, dict) and "seq" in desc and isinstance(desc["seq"], list):
        return [k for d in desc["seq"] for k in tensor_slots(d)]
    if isinstance(desc, dict) and isinstance(desc.get("t"), int):
        return [desc["t"]]
    return [None]
