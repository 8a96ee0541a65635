"""The candidate worker: loads the candidate, runs it under the run-time guards, times it.

Its requests (``load``, ``run``, ``prepare``/``go``/``fetch``), the order of the guards after each forward and
how every phase is guarded: docs/harness-workers.md, "One worker process, and the requests it answers".
"""

from __future__ import annotations

import contextlib
import inspect
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from harness import ipc
from harness.commands import cache_root
from harness.cpu import compiles_remotely
from harness.device_traffic import HostTraffic
from harness.guards import (
    AtenRecorder,
    AuditGuard,
    PatchSnapshot,
    aliases,
    child_processes,
    digest,
    dispatch_depth,
    hook_changes,
    hooks,
    native_thread_count,
    prime,
    python_threads,
    same_bits,
)
from harness.ipc import Message, Reply
from harness.op_watch import OpWatch
from harness.targets import get_target, torch_ext
from harness.targets.base import compile_seconds
from harness.task import Task, load_task
from harness.worker_common import build, build_reference, encode, flat_tensors, init_inputs, make_inputs, model_tensors
from harness.worker_timed import TimedCalls

_clock = time.perf_counter


class Cheat(Exception):
    def __init__(self, check: str, detail: str) -> None:
        super().__init__(detail)
        self.check, self.detail = check, detail


class CandidateWorker:
    def __init__(self) -> None:
        self.phase = "load"
        self.task: Task | None = None
        self._case: tuple[int, int] | None = None
        self._hooks = hooks()  # the interpreter's hooks before any candidate code (harness.guards.hooks)
        self._went = False  # a go request came since the last check

    def handle(self, request: Message, tensors: list) -> tuple[Reply, list]:
        op = request.kind
        self.phase = {"load": "load", "run": "run"}.get(op, "time")
        try:
            if isinstance(request, ipc.Go):  # on the parent's clock: sealed inside it, guarded at the next request
                n, sealed = self.timed.go(self.cand)
                self._went = True
                return ipc.Went(n=n, sealed=sealed), []
            if op != "load":
                self._guard_phase(f"{'during the timed calls, seen ' if self._went else ''}before the {op} request")
                self._went = False
            result = self._dispatch(request)
            if result is not None and not isinstance(result[0], ipc.Failed):
                self._guard_phase(f"during the {op} request")
            if result is not None:
                return result
        except Cheat as cheat:
            return ipc.Failed(
                error_kind=f"cheat_detected:{cheat.check}", message=cheat.detail, compile_time_s=compile_seconds()
            ), []
        return ipc.Failed(error_kind="runtime_error:protocol", message=f"unknown request {op!r}"), []

    def _dispatch(self, request: Message) -> tuple[Reply, list] | None:
        if isinstance(request, ipc.Load):
            return self.load(request), []
        if isinstance(request, ipc.Run):
            return self.run(request)
        if isinstance(request, ipc.Prepare):
            return self.prepare(request), []
        if isinstance(request, ipc.Fetch):
            return self.fetch(bool(request.remote))
        return None

    def _guard_phase(self, where: str) -> None:
        """Hooks as before the candidate was imported; nothing recorded that no phase does."""
        changed = hook_changes(self._hooks)
        if changed:
            raise Cheat(
                "monkey_patch",
                f"{where} the candidate installed an interpreter hook, which runs inside the harness "
                f"(input building, fetching outputs): {'; '.join(changed)}",
            )
        audit = getattr(self, "audit", None)  # installed by load
        if audit is not None:
            sticky = audit.take_sticky()
            if sticky:
                check, detail = sticky[0]
                raise Cheat(check, f"{where} the candidate {detail} (caught by the audit hook; the sandbox blocks it)")

    # -- load ----------------------------------------------------------------------------------------
    def load(self, request: ipc.Load) -> Reply:
        if request.candidate is None or request.case is None or request.init_seed is None:
            raise ipc.ProtocolError("a candidate's load request names its candidate, case and init_seed")
        self.target = get_target(request.target, **request.target_options)
        self.threads = self.target.configure_worker(request.threads, bool(request.deployed))
        self.task = load_task(request.task)
        self.hardware = self.target.describe_hardware()
        self.omp_env = os.environ.get("OMP_NUM_THREADS")
        torch_ext.install()
        path = Path(request.candidate).resolve()
        # the harness's own files: the compile cache, the candidate, a runtime's cache in scratch (Triton's)
        runtime_caches = [os.environ[v] for v in ("TRITON_CACHE_DIR",) if os.environ.get(v)]
        # deletions outside scratch are flagged in the sandbox, which blocks them; an unsandboxed worker runs
        # libraries that keep caches in the home folder (Triton renames its cache files into place)
        scratch: list[str | Path] = (
            [os.environ.get("TMPDIR") or tempfile.gettempdir(), os.getcwd()] if compiles_remotely() else []
        )
        self.audit = AuditGuard(allowed_roots=[cache_root(), path, *runtime_caches], scratch=scratch)
        self.target.prime()
        prime()
        self.timed = TimedCalls(self.target, self.hardware, seal_reader=True)
        self.snapshot = PatchSnapshot(instances=[("the worker", self), ("the worker's timed calls", self.timed)])
        module = self.target.compile(path)
        self._guard_phase("at its import")
        model_cls = getattr(module, "ModelNew", None)
        if not (isinstance(model_cls, type) and issubclass(model_cls, torch.nn.Module)):
            found = "nothing" if model_cls is None else type(model_cls).__name__
            return ipc.Failed(
                error_kind="format_error:no_model_new",
                message=f"the candidate must define class ModelNew(torch.nn.Module); found {found}",
            )
        self.cls = model_cls
        self._check_patches()
        case = self.task.case(request.case)
        module = self.task.module_for_case(case)
        init = init_inputs(module, request.init_seed, case.name)
        try:
            inspect.signature(model_cls).bind(*init)
        except TypeError as exc:
            return ipc.Failed(
                error_kind="format_error:signature",
                message=f"ModelNew{inspect.signature(model_cls)} cannot take get_init_inputs() = {init!r}: {exc}",
            )
        self._prepare(request.case, request.init_seed)
        self._check_patches()
        return ipc.Loaded(compile_time_s=compile_seconds(), threads=native_thread_count())

    def _prepare(self, index: int, init_seed: int) -> None:
        if self._case == (index, init_seed):
            return
        if self.task is None:
            raise RuntimeError("run before load: no task in this worker")
        case = self.task.case(index)
        module = self.task.module_for_case(case)
        self.snapshot.add("task", module)
        self.snapshot.add("task.Model", module.Model)
        init = init_inputs(module, init_seed, case.name)
        device = self.target.device
        self.ref = build_reference(module, init, init_seed, device, case.name)
        self.cand = build(self.cls, init, init_seed, device)
        self._guard_phase("while ModelNew was built")  # a hook from __init__ would see this request's inputs built
        _share_parameters(self.ref, self.cand)
        self.module, self.case, self._case = module, case, (index, init_seed)
        self._check_patches()  # the full check, with the case's task added: a unit's fetch then runs the quick one, as
        # the reference worker's mirror of it does (otherwise 3-5 ms more in the candidate's first fetch of each case)

    # -- run -----------------------------------------------------------------------------------------
    def run(self, request: ipc.Run) -> tuple[Reply, list]:
        self._prepare(request.case, request.init_seed)
        device = self.target.device
        trials: list[dict] = []
        out_tensors: list[Any] = []
        previous: list[Any] | None = None
        native_base = None
        if self.target.warmup_forward:  # JIT targets compile on the first call: do it outside the guards
            threads_before, children_before = python_threads(), set(child_processes())
            with torch.no_grad():
                self.target.run(
                    self.cand, make_inputs(self.module, request.seeds[0] ^ 0x5A5A5A5A, device, self.case.name)
                )
            self._check_leftovers(threads_before, children_before)
            self._check_patches()
        for t, seed in enumerate(request.seeds):
            fresh = make_inputs(self.module, seed, device, self.case.name)
            fresh_digest = digest(fresh) if t == 0 else None
            inputs = _reuse_buffers(previous, fresh) if t == 1 else fresh
            originals = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            threads_before, children_before = python_threads(), set(child_processes())
            if t == 1 and self.target.check_native_threads:
                native_base = native_thread_count()
            recorder = AtenRecorder()
            traffic = HostTraffic.for_target(self.target) if t == 0 else None  # GPU targets: no CPU fallback
            watch = OpWatch() if traffic is None else None  # the dispatcher's view (one profiler at a time)
            if traffic is not None:
                traffic.start_profiler()  # the profiler starts and stops outside the guarded window
            depth = dispatch_depth()
            entered = stayed = returned = False
            self.audit.arm()
            try:
                with torch.no_grad(), watch or contextlib.nullcontext(), recorder, traffic or contextlib.nullcontext():
                    entered = recorder.on_stack()
                    start = _clock()
                    out = self.target.run(self.cand, inputs)
                    forward_s = _clock() - start
                    returned, stayed = True, recorder.on_stack()
            except Exception:
                if not entered or (returned and not stayed):  # a patched __enter__ leaves __exit__ nothing to pop
                    raise _recorder_off(entered, stayed) from None
                raise
            finally:
                events = self.audit.disarm()
                if traffic is not None:
                    traffic.stop_profiler()  # its events are read in memory, never through a file
            if not (entered and stayed) or dispatch_depth() != depth:
                raise _recorder_off(entered, stayed)
            fallback = traffic.problem(inputs) if traffic is not None else None
            if fallback is not None:
                raise Cheat("device_to_host", fallback)
            self._after_forward(
                out,
                inputs,
                originals,
                events,
                recorder,
                threads_before,
                children_before,
                native_base,
                lazy_delay=_lazy_delay(forward_s) if (t == 0 and request.lazy_check is not False) else None,
            )
            if watch is not None:
                _check_op_watch(watch, recorder)
            trials.append(
                {
                    "seed": seed,
                    "digest": fresh_digest,
                    "output": encode(out, out_tensors),
                    "aliases": aliases(flat_tensors(out), inputs),
                    "forward_ms": forward_s * 1e3,
                }
            )
            previous = inputs
        reply = ipc.Trials(trials=trials, compile_time_s=compile_seconds())
        if request.remote:  # the parent reads them out of this process (harness.remote_memory)
            reply.remote, out_tensors = self.timed.remote(out_tensors), []
        return reply, out_tensors

    def _after_forward(
        self,
        out: Any,
        inputs: list[Any],
        originals: list[Any],
        events: list[tuple[str, str]],
        recorder: AtenRecorder,
        threads_before: set[int],
        children_before: set[int],
        native_base: int | None,
        lazy_delay: float | None,
    ) -> None:
        self._guard_phase("in forward")  # before the next trial's inputs are built
        if events:
            check, detail = events[0]
            raise Cheat(check, f"during forward the candidate {detail}")
        forbidden = recorder.forbidden
        if forbidden:
            ops = ", ".join(f"aten.{k} x{v}" for k, v in sorted(forbidden.items(), key=lambda kv: -kv[1])[:8])
            raise Cheat(
                "reference_call",
                f"forward dispatched torch compute ops outside the allow-list (allocation, views, copies): {ops}",
            )
        _plain_outputs(out, "output {i} is a {name}, a torch.Tensor subclass: return plain tensors")
        new_threads = python_threads() - threads_before
        if new_threads:
            raise Cheat(
                "leftover_thread",
                f"{len(new_threads)} Python thread(s) started during forward were still running after it returned",
            )
        new_children = set(child_processes()) - children_before
        if new_children:
            raise Cheat(
                "leftover_process",
                f"process(es) {sorted(new_children)} started during forward were still running after it returned",
            )
        if native_base is not None and native_thread_count() > native_base:
            raise Cheat(
                "leftover_thread",
                f"the process had {native_thread_count()} threads after forward, {native_base} before: "
                "forward left threads running",
            )
        if self._threads_changed():
            raise Cheat(
                "thread_count",
                f"forward changed the thread count (torch: {torch.get_num_threads()}, "
                f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}); the harness fixes it at {self.threads}",
            )
        if lazy_delay is not None:
            snapshot = [t.detach().clone() for t in flat_tensors(out)]
            time.sleep(lazy_delay)
            for i, (before, now) in enumerate(zip(snapshot, flat_tensors(out))):
                if not same_bits(before, now):
                    raise Cheat(
                        "lazy_output",
                        f"output {i} kept changing after forward returned: the work must finish inside forward",
                    )
        for i, (before, now) in enumerate(zip(originals, inputs)):
            if isinstance(before, torch.Tensor) and not same_bits(before, now):
                raise Cheat("input_mutation", f"forward modified input {i} in place")
        self._check_patches()

    def _check_leftovers(self, threads_before: set[int], children_before: set[int]) -> None:
        if python_threads() - threads_before:
            raise Cheat("leftover_thread", "Python threads started by the candidate were still running afterwards")
        if set(child_processes()) - children_before:
            raise Cheat("leftover_process", "processes started by the candidate were still running afterwards")

    def _threads_changed(self) -> bool:
        return torch.get_num_threads() != self.threads or os.environ.get("OMP_NUM_THREADS") != self.omp_env

    def _check_patches(self) -> None:
        changes = self.snapshot.changes()
        if changes:
            raise Cheat("monkey_patch", "the candidate replaced functions it must not touch: " + "; ".join(changes))

    # -- timed units ---------------------------------------------------------------------------------
    def prepare(self, request: ipc.Prepare) -> Reply:
        self._prepare(request.case, request.init_seed)
        self._unit_threads, self._unit_children = python_threads(), set(child_processes())
        self.timed.prepare(self.module, model_tensors(self.cand), request.seeds, self.case.name)
        return ipc.Done()

    def fetch(self, remote: bool = False) -> tuple[Reply, list]:
        self._check_leftovers(self._unit_threads, self._unit_children)
        for out in self.timed.outputs:
            _plain_outputs(out, "timed output {i} is a {name}: return plain tensors")
        for inputs, out in zip(self.timed.inputs, self.timed.outputs):
            alias = aliases(flat_tensors(out), inputs)
            if alias:
                raise Cheat("output_aliases_input", f"during timing, {alias}")
        if self._threads_changed():
            raise Cheat("thread_count", f"the thread count changed during timing (torch: {torch.get_num_threads()})")
        self._check_patches()
        items, tensors = self.timed.fetch()
        reply = ipc.Fetched(items=items, reused=self.timed.reused_buffer(), compile_time_s=compile_seconds())
        if remote:  # the parent reads them out of this process (harness.remote_memory)
            reply.remote, tensors = self.timed.remote(tensors), []
        return reply, tensors


def _plain_outputs(out: Any, message: str) -> None:
    """``tensor_subclass`` when an output is a torch.Tensor subclass (``message`` formatted with ``i`` and ``name``)."""
    for i, value in enumerate(_flatten(out)):
        if isinstance(value, torch.Tensor) and type(value) is not torch.Tensor:
            raise Cheat("tensor_subclass", message.format(i=i, name=type(value).__name__))


def _recorder_off(entered: bool, stayed: bool) -> Cheat:
    """The dispatch recorder was not where ``with recorder:`` puts it (torch's C dispatch stack, read directly)."""
    where = (
        "not on torch's dispatch-mode stack when forward began"
        if not entered
        else "taken off torch's dispatch-mode stack by forward"
        if not stayed
        else "left on torch's dispatch-mode stack after its with-block ended"
    )
    return Cheat(
        "monkey_patch",
        f"the dispatch recorder (harness.guards.AtenRecorder) was {where}: the dispatch machinery was patched "
        "(caught by the worker's check of torch's C dispatch stack)",
    )


def _check_op_watch(watch: OpWatch, recorder: AtenRecorder) -> None:
    """What the dispatcher's op observer saw below the dispatch modes (``harness.op_watch``)."""
    if watch.problem is not None:
        raise Cheat("monkey_patch", f"{watch.problem} (caught by the harness's op observer, RecordFunction)")
    below = watch.forbidden(recorder.counts)
    if below:
        ops = ", ".join(f"aten.{name} x{n}" for name, n in sorted(below.items()))
        raise Cheat(
            "reference_call",
            f"forward ran {ops} where the dispatch recorder did not see them (torch's dispatch modes switched off or "
            "bypassed; seen by the harness's op observer of the dispatcher, RecordFunction): the kernel must compute "
            "the result itself",
        )


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _flatten(v)]
    return [value]


def _lazy_delay(forward_s: float) -> float:
    return min(0.2, max(0.02, 3 * forward_s))


def _reuse_buffers(previous: list[Any] | None, fresh: list[Any]) -> list[Any]:
    """The previous trial's tensors refilled with this trial's values (same pointers, new data)."""
    if previous is None or len(previous) != len(fresh):
        return fresh
    out = []
    for old, new in zip(previous, fresh):
        if (
            isinstance(old, torch.Tensor)
            and isinstance(new, torch.Tensor)
            and old.shape == new.shape
            and old.dtype == new.dtype
            and old.stride() == new.stride()
        ):
            old.copy_(new)
            out.append(old)
        else:
            out.append(new)
    return out


def _share_parameters(ref: Any, cand: Any) -> None:
    """When ModelNew holds the same parameters as Model (same names and shapes), give it Model's values.

    KernelBench relies on equal seeds giving equal initial parameters; this makes it robust to a
    candidate that creates its parameters in another order.
    """
    if not (isinstance(ref, torch.nn.Module) and isinstance(cand, torch.nn.Module)):
        return
    ref_state, cand_state = ref.state_dict(), cand.state_dict()
    if ref_state.keys() != cand_state.keys() or not ref_state:
        return
    if all(ref_state[k].shape == cand_state[k].shape and ref_state[k].dtype == cand_state[k].dtype for k in ref_state):
        with torch.no_grad():
            cand.load_state_dict(ref_state)
