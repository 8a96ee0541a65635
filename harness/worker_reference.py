"""The reference worker: computes the task's outputs for given seeds. It never loads a candidate.

Requests:

* ``load`` {task, target, target_options, threads}: load and validate the task; reply with the hardware.
* ``reference`` {case, init_seed, seeds, retries}: for each seed, the inputs' digest and the
  reference output; when an output is degenerate (constant, all zeros, NaN/Inf) the seed is
  replaced (up to ``retries`` times) and the seed actually used is reported.
* ``time_reference`` {case, init_seed, seed, reps}: milliseconds per reference call (for
  checking that a task's sizes are sensible).
* ``prepare`` {case, init_seed, seeds}, ``go`` {}, ``fetch`` {remote}: one timed unit of reference
  calls (``harness.worker_timed``), the same code the candidate worker runs.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from harness.compare import degenerate_reason
from harness.errors import HarnessError
from harness.guards import aliases, digest
from harness.index_check import index_extras
from harness.targets import get_target
from harness.targets.base import Target
from harness.task import Task, load_task
from harness.worker_common import build_reference, encode, flat_tensors, init_inputs, make_inputs, model_tensors
from harness.worker_timed import TimedCalls

SEED_STRIDE = 1_000_003


class ReferenceWorker:
    phase = "reference"

    def __init__(self) -> None:
        self._task: Task | None = None
        self._target: Target | None = None
        self.timed: TimedCalls | None = None
        self._case: tuple[int, int] | None = None
        self._model: Any = None
        self._module: Any = None

    @property
    def task(self) -> Task:
        if self._task is None:
            raise HarnessError("the reference worker got a request before `load`")
        return self._task

    @property
    def target(self) -> Target:
        if self._target is None:
            raise HarnessError("the reference worker got a request before `load`")
        return self._target

    @property
    def timer(self) -> TimedCalls:
        if self.timed is None:
            raise HarnessError("the reference worker got a request before `load`")
        return self.timed

    def handle(self, op: str, header: dict, tensors: list) -> tuple[dict, list]:
        try:
            if op == "load":
                return self.load(header), []
            if op == "reference":
                return self.reference(header)
            if op == "time_reference":
                return self.time_reference(header), []
            if op == "prepare":
                self._prepare(header["case"], header["init_seed"])
                case = self.task.case(header["case"])
                self.timer.prepare(self._module, model_tensors(self._model), header["seeds"], case.name)
                return {"ok": True}, []
            if op == "go":
                return {"ok": True, "n": self.timer.go(self._model)}, []
            if op == "fetch":
                items, tensors = self.timer.fetch()
                for item, inputs in zip(items, self.timer.inputs):  # index outputs: judged by what they point at
                    item.update(index_extras(self.task, self._module, inputs, tensors))
                reply = {"ok": True, "items": items, "reused": self.timer.reused_buffer()}
                if header.get("remote"):  # the parent reads them out of this process (harness.remote_memory)
                    reply["remote"], tensors = self.timer.remote(tensors), []
                return reply, tensors
        except HarnessError as exc:
            return {"ok": False, "reference_failed": str(exc)}, []
        except Exception as exc:  # the task's own code failed somewhere we did not wrap
            return {"ok": False, "reference_failed": f"{type(exc).__name__}: {exc}"}, []
        return {"ok": False, "reference_failed": f"unknown request {op!r}"}, []

    def load(self, header: dict) -> dict:
        self._target = get_target(header["target"], **header.get("target_options", {}))
        self._target.configure_worker(header)
        self._task = load_task(header["task"])
        hardware = self._target.describe_hardware()
        self.timed = TimedCalls(self.target, hardware)
        return {"ok": True, "hardware": hardware.to_dict()}

    def _prepare(self, index: int, init_seed: int) -> None:
        if self._case == (index, init_seed):
            return
        case = self.task.case(index)
        module = self.task.module_for_case(case)
        init = init_inputs(module, init_seed, case.name)
        self._model = build_reference(module, init, init_seed, self.target.device, case.name)
        self._module, self._case = module, (index, init_seed)

    def reference(self, header: dict) -> tuple[dict, list]:
        index, init_seed = header["case"], header["init_seed"]
        case = self.task.case(index)
        self._prepare(index, init_seed)
        trials: list[dict[str, Any]] = []
        out_tensors: list[torch.Tensor] = []
        for seed in header["seeds"]:
            for attempt in range(header.get("retries", 0) + 1):
                used = seed + attempt * SEED_STRIDE
                inputs = make_inputs(self._module, used, self.target.device, case.name)
                before = digest(inputs)  # every trial's: any one of them may be the first of a later evaluation (cache)
                try:
                    with torch.no_grad():
                        out = self.target.run(self._model, inputs)
                except Exception as exc:
                    raise HarnessError(
                        f"case {case.name!r}: the reference forward raised {type(exc).__name__}: {exc}"
                    ) from None
                reason = degenerate_reason(out)
                if reason is None or attempt == header.get("retries", 0):
                    break
            trials.append(
                {
                    "seed": used,
                    "digest": before,
                    "output": encode(out, out_tensors),
                    "degenerate": reason,
                    "aliases_input": aliases(flat_tensors(out), inputs) is not None,
                    **index_extras(self.task, self._module, inputs, out_tensors),
                }
            )
        return {"ok": True, "trials": trials}, out_tensors

    def time_reference(self, header: dict) -> dict:
        self._prepare(header["case"], header["init_seed"])
        case = self.task.case(header["case"])
        inputs = make_inputs(self._module, header["seed"], self.target.device, case.name)
        samples = []
        with torch.no_grad():
            self.target.run(self._model, inputs)
            for _ in range(header.get("reps", 3)):
                start = time.perf_counter()
                self.target.run(self._model, inputs)
                samples.append((time.perf_counter() - start) * 1e3)
        return {"ok": True, "ms": samples}
