"""Check a task file end to end: validate it, then run every case's reference once in a worker.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from harness import ipc
from harness.errors import ReferenceFailedError
from harness.hardware import available_cores
from harness.targets import get_target
from harness.task import Task
from harness.task_loader import load_task_isolated
from harness.worker_limits import WorkerError


@dataclass
class CaseCheck:
    index: int
    name: str
    ok: bool
    error: str | None = None
    outputs: list[str] | None = None  # "float32[16, 1024]" per output tensor
    degenerate: str | None = None
    ref_ms: float | None = None

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def check_task(
    task: str | Path | Task,
    *,
    measure: bool = False,
    target: str = "cpu",
    timeout_s: float = 300.0,
    threads: int | None = None,
) -> tuple[Task, list[CaseCheck]]:
    loaded = task if isinstance(task, Task) else load_task_isolated(task)
    tgt = get_target(target)
    tgt.check_available()
    threads = threads or available_cores()
    # The reference is the task's code: the same sandboxed worker as an evaluation's (SandboxUnavailableError
    # where it cannot be set up and the user did not opt out), not an unsandboxed one with this environment.
    from harness.eval_setup import EvalOptions, use_sandbox, worker_spec

    worker = worker_spec(tgt, threads, use_sandbox(None), EvalOptions(target=target, threads=threads)).start(
        "reference"
    )
    results: list[CaseCheck] = []
    try:
        reply, _ = worker.request(
            ipc.Load(task=str(loaded.path), target=tgt.name, target_options=tgt.options(), threads=threads),
            timeout_s,
            "loading the task",
        )
        if isinstance(reply, ipc.Failed):
            raise ReferenceFailedError(f"{loaded.path}: {reply.reference_failed}")
        for case in loaded.all_cases:  # held-out cases must work too
            try:
                reply, tensors = worker.request(
                    ipc.Reference(case=case.index, init_seed=0, seeds=[1], retries=4), timeout_s, f"case {case.name!r}"
                )
            except WorkerError as exc:
                results.append(CaseCheck(case.index, case.name, False, f"the reference worker failed: {exc}"))
                break
            if isinstance(reply, ipc.Failed):
                results.append(CaseCheck(case.index, case.name, False, reply.reference_failed))
                continue
            trial = ipc.expect(reply, ipc.Trials).trials[0]
            check = CaseCheck(
                case.index,
                case.name,
                True,
                outputs=[f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}" for t in tensors],
                degenerate=trial.get("degenerate"),
            )
            if measure:
                timed, _ = worker.request(
                    ipc.TimeReference(case=case.index, init_seed=0, seed=1, reps=5),
                    timeout_s,
                    f"timing case {case.name!r}",
                )
                check.ref_ms = statistics.median(timed.ms) if isinstance(timed, ipc.Times) else None
            results.append(check)
    finally:
        worker.close()
    return loaded, results
