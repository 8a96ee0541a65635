"""The worker pools: booted workers kept ahead (warm), and loaded reference workers kept for the next evaluation.

``WarmPool`` (``take``, the background refill, ``pause``/``resume`` while timing) and ``REFERENCE_POOL``:
docs/harness-workers.md, "The worker model". One worker process is ``harness.worker_process.Worker``; its limits and
errors are ``harness.worker_limits``.
"""

from __future__ import annotations

import atexit
import shutil
import signal
import threading
from dataclasses import dataclass

from harness import settings
from harness.sandbox import CPU_PROFILE, SandboxProfile
from harness.worker_limits import BOOT_TIMEOUT_S, Limits
from harness.worker_process import Worker, live_workers
from harness.zygote_client import close_zygotes


def pool_size() -> int:
    """Warm workers kept per configuration: ``KOPE_HARNESS_POOL`` or one per two CPUs (1 to 4)."""
    size = settings.pool_size()
    if size is not None:
        return size
    from harness.hardware import available_cores

    return max(1, min(4, available_cores() // 2))


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a booted worker depends on (two evaluations with equal specs can share a pool)."""

    env: tuple[tuple[str, str], ...]
    limits: Limits
    uses_rlimit_as: bool
    sandboxed: bool
    hidden: tuple[str, ...]
    cache_root: str | None
    profile: SandboxProfile = CPU_PROFILE  # what the sandbox opens for the target (harness.sandbox.PROFILES)

    def start(self, role: str = "warm", zygote: bool = True) -> Worker:
        """A worker booting now (``zygote=False``: an interpreter and torch of its own, not a fork of the zygote)."""
        return Worker(
            role,
            dict(self.env),
            self.limits,
            self.uses_rlimit_as,
            sandboxed=self.sandboxed,
            hidden=self.hidden,
            cache_root=self.cache_root,
            zygote=zygote,
            profile=self.profile,
        )


class WarmPool:
    """Booted, idle workers by spec; each one is handed out once."""

    def __init__(self, size: int | None = None) -> None:
        self.size = pool_size() if size is None else size
        self._idle: dict[WorkerSpec, list[Worker]] = {}
        self._starting: dict[WorkerSpec, int] = {}
        self._booting: set[Worker] = set()
        self._stopped: set[Worker] = set()  # every worker pause() stopped and nobody continued yet, booting or not
        self._paused = 0
        self._generation = 0  # close_all() starts a new one: boots of an older one are discarded
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a boot ended (worker idle, or the start failed)
        self._waiting: dict[WorkerSpec, int] = {}  # takers waiting for a boot, by spec
        self._served: set[WorkerSpec] = set()  # specs some evaluation already took a worker for
        self._closed = False

    def take(self, spec: WorkerSpec, refill: bool = True) -> Worker:
        """A booted worker for ``spec``: an idle one, else one already starting (its boot is waited for rather
        than a second one started beside it), else one started now; its replacement starts in the background
        (``refill=False``: the caller evaluates no more, so none is booted for nothing)."""
        worker = None
        with self._changed:
            self._served.add(spec)
            while worker is None:
                idle = self._idle.get(spec, [])
                while idle and worker is None:
                    candidate = idle.pop(0)
                    if candidate.alive():
                        worker = candidate
                    else:
                        candidate.close()
                # wait only for a boot no earlier taker waits for (several takers at once start their own)
                if worker is not None or self._closed or self._starting.get(spec, 0) <= self._waiting.get(spec, 0):
                    break
                self._waiting[spec] = self._waiting.get(spec, 0) + 1
                try:
                    self._changed.wait(BOOT_TIMEOUT_S)
                finally:
                    self._waiting[spec] -= 1
            if worker is not None and worker in self._stopped:  # ready already, so it has no boot left to pause
                worker.signal(signal.SIGCONT)
                self._stopped.discard(worker)
        if worker is None:
            worker = spec.start()
        if refill:
            self._refill(spec)
        return worker

    def prefill(self, spec: WorkerSpec, count: int) -> None:
        """Start booting workers for ``spec`` until ``count`` are idle or booting (a command that will evaluate
        soon calls this first, so that the first evaluation's workers boot while the command starts up). Too
        late, once an evaluation took a worker for ``spec``, it does nothing (the pool's own refill goes on)."""
        with self._lock:
            if spec in self._served:
                return
        self._refill(spec, count)

    def _refill(self, spec: WorkerSpec, want: int | None = None) -> None:
        with self._lock:
            want = self.size if want is None else max(want, self.size)
            if self._closed or want <= 0:
                return
            have = len(self._idle.get(spec, [])) + self._starting.get(spec, 0)
            need = max(0, want - have)
            self._starting[spec] = self._starting.get(spec, 0) + need
        for _ in range(need):
            threading.Thread(target=self._start_one, args=(spec,), daemon=True, name="kope-warm-pool").start()

    def _start_one(self, spec: WorkerSpec) -> None:
        from harness.timing import machine_lock

        worker = None
        generation = self._generation
        try:
            with machine_lock(exclusive=False):  # not while another process times something
                worker = spec.start()
            with self._lock:
                self._booting.add(worker)
                if self._paused:
                    worker.signal(signal.SIGSTOP)
                    self._stopped.add(worker)
            worker.wait_ready(10 * BOOT_TIMEOUT_S)  # it may be stopped for a while: see pause()
        except Exception:  # a failed warm start only means the next take starts one itself
            if worker is not None:
                worker.close()
            worker = None
        with self._changed:  # one step: a take() never sees it neither starting nor idle
            self._booting.discard(worker)
            self._starting[spec] -= 1
            if worker is not None and not self._closed and generation == self._generation:
                self._idle.setdefault(spec, []).append(worker)
                worker = None
            self._changed.notify_all()
        if worker is not None:
            worker.close()

    def pause(self) -> None:
        """Stop every booting worker (SIGSTOP) while this process times something; ``resume`` continues them."""
        with self._lock:
            self._paused += 1
            for worker in self._booting:
                worker.signal(signal.SIGSTOP)
                self._stopped.add(worker)

    def resume(self) -> None:
        with self._lock:
            self._paused = max(0, self._paused - 1)
            if not self._paused:
                # every worker stopped, not only those still booting: one that became ready just as pause() came
                # was stopped and then moved to the idle list, and would have stayed stopped there for good (its
                # taker's first request then never got an answer: timeout:compile after 420 s in a test run)
                for worker in self._stopped:
                    worker.signal(signal.SIGCONT)
                self._stopped.clear()

    def close_all(self) -> None:
        """Close every idle worker and kill the ones still booting."""
        with self._changed:
            self._closed = True
            self._generation += 1
            self._served.clear()
            idle, self._idle = self._idle, {}
            booting = list(self._booting)
            self._changed.notify_all()
        for workers in idle.values():
            for worker in workers:
                worker.close()
        for worker in booting:  # its boot thread closes it; the folder goes now (at exit that thread never runs)
            worker.kill()
            shutil.rmtree(worker.workdir, ignore_errors=True)

    def reopen(self) -> None:
        with self._lock:
            self._closed = False


class ReferencePool:
    """Idle, loaded reference workers kept for the next evaluation of the same task.

    A reference worker runs only the task's own code (never a candidate), so it can serve
    several evaluations. ``take`` hands a worker to one evaluation at a time; ``give``
    returns a healthy one; at most ``size`` idle workers are kept.
    """

    def __init__(self, size: int = 2) -> None:
        self.size = size
        self._idle: list[tuple[tuple, Worker, dict]] = []
        self._lock = threading.Lock()

    def take(self, key: tuple) -> tuple[Worker, dict] | None:
        with self._lock:
            for i, (k, worker, info) in enumerate(self._idle):
                if k == key:
                    del self._idle[i]
                    if worker.alive():
                        return worker, info
                    worker.close()
                    return None
        return None

    def give(self, key: tuple, worker: Worker, info: dict) -> None:
        # an unread reply would answer the next one; a retired worker (sticky device error) is never reused
        if worker.pending or worker.retired or not worker.alive() or self.size <= 0:
            worker.close()
            return
        with self._lock:
            self._idle.append((key, worker, info))
            surplus = self._idle[: -self.size] if len(self._idle) > self.size else []
            self._idle = self._idle[len(surplus) :]
        for _, old, _ in surplus:
            old.close()

    def close_all(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for _, worker, _ in idle:
            worker.close()


REFERENCE_POOL = ReferencePool()
WARM_POOL = WarmPool()


def one_shot() -> None:
    """This process evaluates once and exits: boot no warm worker for a next evaluation, keep no reference worker."""
    WARM_POOL.size = 0
    REFERENCE_POOL.size = 0


def close_pools() -> None:
    """Close every pooled worker (idle reference workers and warm workers)."""
    REFERENCE_POOL.close_all()
    WARM_POOL.close_all()
    WARM_POOL.reopen()


def _close_everything() -> None:
    WARM_POOL.close_all()
    REFERENCE_POOL.close_all()
    for worker in live_workers():
        worker.close(timeout=0.5)
    with Worker._lock:
        left = list(Worker._live)  # started and killed, never closed (e.g. a boot cut short by the exit)
    for worker in left:
        shutil.rmtree(worker.workdir, ignore_errors=True)
    close_zygotes()


atexit.register(_close_everything)
