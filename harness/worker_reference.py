"""The reference worker: computes the task's outputs for given seeds. It never loads a candidate.

Its requests (``load``, ``reference``, ``time_reference``, ``prepare``/``go``/``fetch``, ``calibrate``): docs/harness-workers.md, "One worker process, and the requests it answers".
"""

from __future__ import annotations

import time
from typing import Any

import torch

from harness import ipc
from harness.compare import degenerate_reason
from harness.errors import HarnessError
from harness.guards import PatchSnapshot, aliases, child_processes, digest, python_threads
from harness.index_check import index_extras
from harness.ipc import Message, Reply
from harness.targets import get_target
from harness.targets.base import Target
from harness.task import Task, load_task
from harness.worker_common import build_reference, encode, flat_tensors, init_inputs, make_inputs, model_tensors
from harness.worker_timed import InputRing, TimedCalls

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
        self.mirror: PatchSnapshot | None = None  # _mirror_guards's
        self._precise_case: tuple[tuple[int, int], Any, Any, InputRing] | None = None  # ``precise``'s model, ring

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

    def handle(self, request: Message, tensors: list) -> tuple[Reply, list]:
        try:
            if isinstance(request, ipc.Load):
                return self.load(request), []
            if isinstance(request, ipc.Reference):
                return self.precise(request) if request.precise else self.reference(request)
            if isinstance(request, ipc.TimeReference):
                return self.time_reference(request), []
            if isinstance(request, ipc.Prepare):
                self._prepare(request.case, request.init_seed)
                case = self.task.case(request.case)
                self.timer.prepare(self._module, model_tensors(self._model), request.seeds, case.name)
                return ipc.Done(), []
            if isinstance(request, ipc.Go):
                n, sealed = self.timer.go(self._model)  # sealed like the candidate's (same cost), not used
                return ipc.Went(n=n, sealed=sealed), []
            if isinstance(request, ipc.Calibrate):
                calls, outputs = self.timer.honest_dispatch(request.cpu_ms)
                return ipc.Calibrated(calls=calls, outputs=outputs), []
            if isinstance(request, ipc.Fetch):
                self._mirror_guards()
                items, tensors = self.timer.fetch()
                for item, inputs in zip(items, self.timer.inputs):  # index outputs: judged by what they point at
                    item.update(index_extras(self.task, self._module, inputs, tensors))
                reply = ipc.Fetched(items=items, reused=self.timer.reused_buffer())
                if request.remote:  # the parent reads them out of this process (harness.remote_memory)
                    reply.remote, tensors = self.timer.remote(tensors), []
                return reply, tensors
        except HarnessError as exc:
            return ipc.Failed(reference_failed=str(exc)), []
        except Exception as exc:  # the task's own code failed somewhere we did not wrap
            return ipc.Failed(reference_failed=f"{type(exc).__name__}: {exc}"), []
        return ipc.Failed(reference_failed=f"unknown request {request.kind!r}"), []

    def _mirror_guards(self) -> None:
        """The candidate worker's checks at ``fetch`` (leftovers, aliases, patches), run here on this unit and their
        findings dropped: both workers' fetch windows then cost alike, and the parent bounds the candidate's CPU in
        them against this worker's (``harness.timing.fetch_overrun``)."""
        if self.mirror is None:
            self.mirror = PatchSnapshot()
        python_threads(), child_processes(), self.mirror.changes()
        for inputs, out in zip(self.timer.inputs, self.timer.outputs):
            aliases(flat_tensors(out), inputs)

    def load(self, request: ipc.Load) -> Reply:
        self._target = get_target(request.target, **request.target_options)
        self._target.configure_worker(request.threads, bool(request.deployed))
        self._task = load_task(request.task)
        hardware = self._target.describe_hardware()
        self.timed = TimedCalls(self.target, hardware)
        return ipc.Loaded(hardware=hardware.to_dict())

    def _prepare(self, index: int, init_seed: int) -> None:
        if self._case == (index, init_seed):
            return
        case = self.task.case(index)
        module = self.task.module_for_case(case)
        init = init_inputs(module, init_seed, case.name)
        self._model = build_reference(module, init, init_seed, self.target.device, case.name)
        self._module, self._case = module, (index, init_seed)

    def reference(self, request: ipc.Reference) -> tuple[Reply, list]:
        index, init_seed, retries = request.case, request.init_seed, request.retries or 0
        case = self.task.case(index)
        self._prepare(index, init_seed)
        trials: list[dict[str, Any]] = []
        out_tensors: list[torch.Tensor] = []
        for seed in request.seeds:
            for attempt in range(retries + 1):
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
                if reason is None or attempt == retries:
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
        return ipc.Trials(trials=trials), out_tensors

    def precise(self, request: ipc.Reference) -> tuple[Reply, list]:
        """The outputs for ``request.seeds`` computed in float64: the model's floating-point parameters and buffers
        and the floating-point inputs upcast (the inputs of a timed call's ring seed rebuilt as its unit built them).
        Only ``harness.compare``'s tolerance rule reads them, in the parent; a candidate never sees them."""
        case = self.task.case(request.case)
        if self._precise_case is None or self._precise_case[0] != (request.case, request.init_seed):
            module = self.task.module_for_case(case)
            init = init_inputs(module, request.init_seed, case.name)
            model = build_reference(module, init, request.init_seed, self.target.device, case.name)
            if isinstance(model, torch.nn.Module):
                model = model.to(torch.float64)
            # the ring's sets stay for the next timed call's seed (a unit's calls share them)
            self._precise_case = ((request.case, request.init_seed), module, model, InputRing())
        _, module, model, ring = self._precise_case
        trials: list[dict[str, Any]] = []
        out_tensors: list[torch.Tensor] = []
        for seed in request.seeds:
            inputs = [_upcast(x) for x in ring.inputs(module, seed, self.target.device, case.name)]
            ring.recycle()  # its copies were upcast: the ring may reuse them (else it keeps every one it gave out)
            try:
                with torch.no_grad():
                    out = self.target.run(model, inputs)
            except Exception as exc:
                raise HarnessError(
                    f"case {case.name!r}: the reference forward in float64 raised {type(exc).__name__}: {exc}"
                ) from None
            trials.append({"seed": seed, "output": encode(out, out_tensors)})
        return ipc.Trials(trials=trials), out_tensors

    def time_reference(self, request: ipc.TimeReference) -> Reply:
        self._prepare(request.case, request.init_seed)
        case = self.task.case(request.case)
        inputs = make_inputs(self._module, request.seed, self.target.device, case.name)
        samples = []
        with torch.no_grad():
            self.target.run(self._model, inputs)
            for _ in range(3 if request.reps is None else request.reps):
                start = time.perf_counter()
                self.target.run(self._model, inputs)
                samples.append((time.perf_counter() - start) * 1e3)
        return ipc.Times(ms=samples)


def _upcast(value: Any) -> Any:
    """A floating-point (complex) tensor as float64 (complex128); anything else as it is."""
    if isinstance(value, torch.Tensor):
        if value.is_complex():
            return value.to(torch.complex128)
        if value.is_floating_point():
            return value.to(torch.float64)
    return value
