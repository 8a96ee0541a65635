"""One case's timing, driven from the parent: units of calls in the reference and candidate workers, timed
from outside, interleaved, with the checks that run on every unit (CPU use, idle work, native sampling,
sealed outputs, the outputs of every timed call compared with the reference's).

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import logging
import math
import random
import time
from pathlib import Path
from typing import Any, Protocol

import torch

from harness import ipc
from harness.compare import Precise
from harness.errors import ReferenceFailedError
from harness.guards import unseal
from harness.record import CaseResult, TimingStats
from harness.remote_memory import RemoteMemoryError, RemoteUnavailable, Staging, gather, sample_blocks
from harness.targets.base import Target
from harness.task import Case, Task
from harness.timing import UntimedCpu, next_unit_size
from harness.worker_process import Worker
from harness.worker_timed import RING_KEY_BITS, ring_seed

CPU_SLACK = 1.3  # a timed unit may use at most threads x wall x this much CPU (+ 2 ms)
UNIT_OVERHEADS = 8  # a timed unit lasts at least this many empty round trips (their median is subtracted)
# The native probe's rules and their numbers: docs/harness-workers.md, "Reference calls below Python"
PROBE_MIN_SAMPLES = 40  # fewer samples (2 ms of CPU at PROBE_PERIOD_NS) decide nothing
PROBE_PERIOD_NS = 50_000  # one sample per this much CPU time of a thread
PROBE_LIMIT = 0.5  # more than this share of the native time in reference libraries: reference_call
REFERENCE_BUDGET = 0.5  # ... or more reference-library samples than this fraction of the reference's own, plus the
# per-call dispatch allowance calibrated in the reference worker (harness.dispatch_allowance)
BUDGET_SHARE_FLOOR = 0.02  # ... when those are at least this share of all its samples (honest slow kernels: <= 0.6 %)
# The candidate's CPU while the reference's unit is timed (background_work): docs/harness-workers.md, "Timing from
# outside, adaptively"
IDLE_SLACK_NS = 5_000_000
IDLE_SHARE = 0.25
RING_SIZE = 2  # input sets per case the timed calls' inputs are mixed from (harness.worker_timed.ring_seed)
# As deployed: wait until no thread of either worker is runnable before each unit (docs/harness.md, "As deployed")
SETTLE_STEP_S = 0.0005
SETTLE_MAX_S = 0.05
# After the candidate's go reply in a measured unit, the parent waits this long (drawn from the system's entropy at
# each unit) before its next request, so that what the candidate's process still does after its unit falls in a wait
# stretch (the wait bound), not in the fetch window, whose bound is a median (docs/harness-workers.md, "Timing from
# outside, adaptively")
AFTER_GO_S = (0.001, 0.003)


log = logging.getLogger(__name__)
_ENTROPY = random.SystemRandom()  # nothing a candidate can read or seed
_probe_warned = False


def budget_applies(used: int, share_of_all: float, ref_used: int | None) -> bool:
    """Whether the candidate's ``used`` libtorch samples (``share_of_all`` of all its samples) are judged against the
    budget: the reference worker was sampled, there are enough to decide, and they are not a slow honest kernel's
    trickle (``BUDGET_SHARE_FLOOR``; below it only the share rule judges: a cheat diluted 50x)."""
    return ref_used is not None and used >= PROBE_MIN_SAMPLES and share_of_all >= BUDGET_SHARE_FLOOR


def libtorch_budget(ref_used: int, allowance: float) -> float:
    """The libtorch samples a candidate may use: half the reference's own (at least of ``PROBE_MIN_SAMPLES``) plus
    the calibrated dispatch allowance of its calls, in samples."""
    return REFERENCE_BUDGET * max(PROBE_MIN_SAMPLES, ref_used) + allowance


def _warn_probe_unavailable(exc: OSError) -> None:
    """Said once per process: without perf events a layer of the trust checks is missing (``kope doctor``)."""
    global _probe_warned
    if not _probe_warned:
        _probe_warned = True
        log.warning(
            "the native probe cannot sample the candidate here (%s): reference work reached below Python (C++ calling "
            "libtorch, a helper thread with dispatch modes off) is not caught by it; `kope doctor` says how to allow "
            "perf events",
            exc,
        )


def _running(pid: int, tid: int) -> bool:
    """Whether thread ``tid`` of process ``pid`` is running or runnable (/proc/PID/task/TID/stat, state R)."""
    try:
        stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 : stat.rfind(")") + 3] == "R"


class Stop(Exception):
    """Ends the evaluation early with (status-carrying) error kind, message and output. ``recheck``: a statistical
    finding over the measured units that stands only if a second measurement of the case finds it too
    (``harness.evaluate``, ``CONFIRMATIONS``)."""

    def __init__(self, kind: str, message: str, output: str = "", recheck: bool = False) -> None:
        super().__init__(message)
        self.kind, self.message, self.output, self.recheck = kind, message, output, recheck


class TimedEvaluation(Protocol):
    """What a case's timing needs from the evaluation that runs it (``harness.evaluate._Evaluation``)."""

    @property
    def ref(self) -> Worker: ...  # the reference worker

    @property
    def cand(self) -> Worker: ...  # the candidate worker

    options: Any  # harness.eval_setup.EvalOptions
    rng: random.Random
    staging: Staging
    target: Target
    task: Task
    results: dict[int, CaseResult]  # case index -> its result
    threads: int
    task_threads: int
    ref_healthy: bool
    case_kinds: Any
    init_seeds: Any

    def remote_reads(self) -> bool: ...

    def trace(self, what: str) -> None: ...

    def candidate_reply(self, timeout: float, case: Case, doing: str) -> tuple[ipc.Reply, list]: ...

    def reference_reply(self, timeout: float, what: str) -> tuple[ipc.Reply, list]: ...

    def case_error(self, case: Case, reply: ipc.Failed) -> None: ...

    def precise_reference(self, case: Case, seed: int, desc: Any = None, blocks: Any = None) -> Precise: ...


class CaseTimer:
    """One case's timing, driven from the parent: units of calls in each worker, timed from outside."""

    def __init__(self, ev: TimedEvaluation, case: Case) -> None:
        self.ev, self.case = ev, case
        self.budget = ev.options.budget
        self.began = time.monotonic()
        self.deadline = self.began + min(self.budget.max_wall_s, ev.options.timing_timeout_s)
        self.rng = ev.rng if ev.options.seed is not None else random.SystemRandom()
        self.workers = {"ref": ev.ref, "cand": ev.cand}
        self.overhead_ns: dict[str, float] = {"ref": 0, "cand": 0}
        self.samples: dict[str, list[float]] = {"ref": [], "cand": []}
        self.spent_ms = {"ref": 0.0, "cand": 0.0}
        self.calls = {"ref": 0, "cand": 0}  # timed calls so far (the native probe's per-call allowance)
        self.outputs_per_call = 1  # output tensors of one reference call (the native probe's allowance)
        self.samplers: dict[str, Any] = {}  # who -> native_probe.Sampler, over the measured units
        # the candidate's CPU during the reference's units, their wall time, and the CPU one busy thread got in them
        self.idle_cpu_ns = self.idle_wall_ns = self.idle_basis_ns = 0
        # both workers' CPU in the measured units' prepare windows (from the request to both replies), fetch windows,
        # and the stretches between them and each one's own timed unit
        self.untimed = UntimedCpu()
        self.sealed: Any = None  # the candidate's seal of its last timed unit (harness.guards.seal; unseal at fetch)
        self.remote = ev.remote_reads()
        self.staging = ev.staging
        # the ring's keys (get_inputs under each, in both workers), drawn at random per case; every timed call's
        # seed names two of them and a mixing seed, never the same seed twice in a case (harness.worker_timed)
        self.ring_keys = self.rng.sample(range(1, 1 << RING_KEY_BITS), RING_SIZE) if ev.options.input_ring else []
        self.used_seeds: set[int] = set()

    # -- requests ----------------------------------------------------------------------------------
    def _ask(self, who: str, request: ipc.Request) -> tuple[ipc.Reply, list]:
        self._send(who, request)
        return self._receive(who)

    def _send(self, who: str, request: ipc.Request) -> None:
        self.workers[who].send(request)

    def _receive(self, who: str) -> tuple[ipc.Reply, list]:
        ev = self.ev
        timeout = max(1.0, self.deadline - time.monotonic() + 30.0)
        if who == "ref":
            reply, tensors = ev.reference_reply(timeout, f"timing case {self.case.name!r}")
        else:
            reply, tensors = ev.candidate_reply(timeout, self.case, "timing")
            if isinstance(reply, ipc.Failed):
                ev.case_error(self.case, reply)
                raise Stop(reply.error_kind or "runtime_error:unknown", reply.message or "")
        return reply, tensors

    def _fetch_both(self) -> tuple[dict[str, tuple[ipc.Reply, list]], Any]:
        """Both workers' outputs of the unit just timed: the blocks of each output drawn now (``_blocks``) read out
        of their memory where the kernel allows it (``harness.remote_memory``), else whole through their pipes."""
        before = self._cpu_both()
        self.untimed.open_fetch(before)
        if self.remote:
            try:
                got = self._both(ipc.Fetch(remote=True))
                self._close_fetch(before)
                self.sealed = unseal(self.sealed, ipc.expect(got["cand"][0], ipc.Fetched).items)
                specs = {who: ipc.expect(reply, ipc.Fetched).remote for who, (reply, _) in got.items()}
                blocks = self._blocks(specs["ref"], specs["cand"])
                return {who: (got[who][0], self._read_remote(who, specs[who], blocks)) for who in got}, blocks
            except RemoteUnavailable as exc:  # both replies were read; both workers still hold their outputs
                self.remote = False
                self.ev.trace(f"remote fetch unavailable, outputs through the pipes: {exc}")
        got = self._both(ipc.Fetch())
        self._close_fetch(before)
        self.sealed = unseal(self.sealed, ipc.expect(got["cand"][0], ipc.Fetched).items)
        return got, None

    def _blocks(self, specs: Any, theirs: Any) -> list | None:
        """The blocks of each timed output read and compared (``remote_memory.sample_blocks``), drawn after the unit
        returned and its outputs were sealed, the same in both workers; None (all) for no outputs or where the two
        describe them differently (docs/harness-workers.md, "Sampled checks of timed outputs")."""
        try:
            sealed: dict[int, list[int]] = {}  # the sealed elements are read too (sealed_mismatch)
            for entry in self.sealed:
                sealed.setdefault(int(entry["i"]), []).extend(int(at) for at in entry["at"])
            if specs and [(r["dtype"], r["shape"]) for r in specs] == [(c["dtype"], c["shape"]) for c in theirs]:
                sizes = [(math.prod(r["shape"]), ipc.DTYPES[r["dtype"]].itemsize) for r in specs]
                generator = torch.Generator().manual_seed(self.rng.getrandbits(63))
                return [sample_blocks(n, size, generator, sealed.get(i, ())) for i, (n, size) in enumerate(sizes)]
        except (TypeError, KeyError, ValueError, AttributeError):
            pass
        return None

    def _read_remote(self, who: str, specs: Any, blocks: Any = None) -> list:
        worker = self.workers[who]
        try:
            return self.staging.read(who, worker.pid, specs, self.ev.options.limits.max_message_bytes, blocks)
        except RemoteUnavailable:
            raise
        except RemoteMemoryError as exc:
            if who == "ref":
                self.ev.ref_healthy = False
                raise ReferenceFailedError(
                    f"task {self.ev.task.operator}: the reference worker's timed outputs could not be read: {exc}"
                ) from None
            raise Stop(
                "runtime_error:protocol", f"case {self.case.name!r}: the candidate worker sent a malformed reply: {exc}"
            ) from None

    def _both(self, request: ipc.Request) -> dict[str, tuple[ipc.Reply, list]]:
        """The same request to both workers at once (untimed work: input generation, outputs); the reference's
        reply is always read first, so a candidate that fails never leaves a reply behind in the pooled
        reference worker's pipe."""
        self._send_both(request)
        return self._receive_both()

    def _send_both(self, request: ipc.Request) -> None:
        self._send("ref", request)
        try:
            self._send("cand", request)
        except BaseException:
            self._receive("ref")
            raise

    def _receive_both(self) -> dict[str, tuple[ipc.Reply, list]]:
        return {"ref": self._receive("ref"), "cand": self._receive("cand")}  # the reference's first (_both)

    def _drain_both(self) -> None:
        """Reads and drops the replies to requests sent to both workers (the evaluation has its verdict already)."""
        for who in ("ref", "cand"):
            try:
                self.workers[who].receive(max(1.0, self.deadline - time.monotonic() + 30.0), "a reply nobody needs")
            except Exception:  # a worker in trouble now: the reference one is not reused
                if who == "ref":
                    self.ev.ref_healthy = False

    def _fresh_seeds(self, n: int) -> list[int]:
        """Seeds for ``n`` timed calls: ring seeds (two ring sets in a random order, a random mixing seed) never
        used before in this case; plain fresh seeds without the ring."""
        if not self.ring_keys:
            return [self.rng.randrange(1 << 31) for _ in range(n)]
        # each set first in an even share of the calls, in a random order: each worker then makes a call's inputs in a
        # copy of the last unit's from the same set, rewriting only the runs mixed in (harness.worker_timed.InputRing)
        firsts = [self.ring_keys[i % len(self.ring_keys)] for i in range(n)]
        self.rng.shuffle(firsts)
        seeds: list[int] = []
        while len(seeds) < n:
            first = firsts[len(seeds)]
            second = self.rng.choice([key for key in self.ring_keys if key != first])
            seed = ring_seed(first, second, self.rng.randrange(1 << RING_KEY_BITS))
            if seed not in self.used_seeds:
                self.used_seeds.add(seed)
                seeds.append(seed)
        return seeds

    def _cpu_both(self) -> tuple[int, int]:
        return self.workers["ref"].cpu_ns(), self.workers["cand"].cpu_ns()

    def _close_fetch(self, before: tuple[int, int]) -> None:
        """One fetch window: (reference's, candidate's) CPU from before the request to after both replies."""
        self.untimed.close_fetch(before, self._cpu_both())

    def _open_prepare(self) -> None:
        self.untimed.open_prepare(self._cpu_both())

    def _close_prepare(self) -> None:
        self.untimed.close_prepare(self._cpu_both())

    def _warm_ring(self) -> None:
        """Both workers build every ring set before the measured units: a pooled reference worker may hold them
        from an earlier evaluation (the ring keys follow the evaluation's seed), a fresh candidate worker does not."""
        if self.ring_keys:
            keys = self.ring_keys
            seeds = [
                ring_seed(keys[i - 1], keys[i], self.rng.randrange(1 << RING_KEY_BITS)) for i in range(1, len(keys), 2)
            ]
            self.used_seeds.update(seeds)
            self._both(self._prepare_message(seeds))

    @property
    def _untimed_judged(self) -> bool:
        """Whether the candidate's CPU in the untimed stretches is judged (not as deployed, nor on GPU targets)."""
        return self.ev.target.check_native_threads and not self.ev.options.deployed

    def _judge_untimed(self) -> None:
        """The candidate's CPU while both workers prepared the same inputs, described their outputs and waited."""
        if not self._untimed_judged:
            return
        found = self.untimed.overrun(self.ev.threads)
        if found is not None:
            raise Stop("cheat_detected:background_work", f"case {self.case.name!r}: {found}", recheck=True)

    def _prepare_message(self, seeds: list[int]) -> ipc.Prepare:
        return ipc.Prepare(case=self.case.index, init_seed=self.ev.init_seeds[self.case.index], seeds=seeds)

    def _unit(self, who: str, seeds: list[int]) -> float:
        """Prepare, then time one unit of ``len(seeds)`` calls from here; returns ns as measured (round trip included)."""
        self._ask(who, self._prepare_message(seeds))
        return self._go(who, bool(seeds))

    def _go(self, who: str, calls: bool, sampled: bool = False) -> int:
        """Times one prepared unit from here (round trip included), with the checks from outside around it."""
        ev, worker = self.ev, self.workers[who]
        watch = who == "ref" and calls and ev.target.check_native_threads
        if ev.options.deployed and calls:  # both: its own OpenMP threads still spin after building the inputs
            self._settle(self.workers["cand" if who == "ref" else "ref"])
            self._settle(worker)
        began = time.perf_counter_ns()  # the CPU bound's window: from before its first clock read to after its last
        own0, idle0 = worker.cpu_ns(), ev.cand.cpu_ns() if watch else 0
        if sampled:  # a measured unit: what it used since its last reading, it used waiting
            self.untimed.wait(0, who == "cand", own0)
        sampler = self.samplers.get(who) if sampled else None
        if sampler is not None:
            sampler.enable()
        start = time.perf_counter_ns()
        try:
            went = self._ask(who, ipc.Go())[0]
        finally:
            elapsed = time.perf_counter_ns() - start
            if sampler is not None:
                sampler.disable()
            own1, ended = worker.cpu_ns(), time.perf_counter_ns()
            if sampler is not None:
                sampler.collect()  # off the clock: the ring buffers emptied after every unit
        if sampled:  # from here it waits again
            self.untimed.last[who == "cand"] = own1
        if who == "cand" and calls:  # as deployed its OpenMP threads spin on after the call, so the wall time the
            # CPU is bounded by runs to the clock's read (a starved parent read 7.3 ms of 2 threads in a 1.9 ms unit)
            self._check_cpu(own1 - own0, ended - began)
        elif watch:
            self._check_idle(ev.cand.cpu_ns() - idle0, elapsed, own1 - own0)
        if who == "cand":  # random elements of its outputs, sealed inside go right after its calls (guards.seal)
            self.sealed = ipc.expect(went, ipc.Went).sealed
        return elapsed

    def _quiet_after_go(self) -> None:
        """The parent's pause after the candidate's unit (``AFTER_GO_S``), where the wait bound applies."""
        if self._untimed_judged:
            time.sleep(_ENTROPY.uniform(*AFTER_GO_S))

    @staticmethod
    def _settle(worker: Any) -> None:
        """Wait (at most SETTLE_MAX_S) until no thread of ``worker`` runs: spin-waiting OpenMP threads went to sleep."""
        deadline = time.monotonic() + SETTLE_MAX_S
        while any(_running(worker.pid, tid) for tid in worker.tasks()) and time.monotonic() < deadline:
            time.sleep(SETTLE_STEP_S)

    def _check_idle(self, cpu_ns: int, wall_ns: int, ref_cpu_ns: int) -> None:
        """The candidate's process idle while the reference is timed, per unit and over all so far (read from /proc;
        docs/harness-workers.md, "Timing from outside, adaptively")."""
        basis = min(wall_ns, ref_cpu_ns // max(1, self.ev.threads)) if ref_cpu_ns > 0 else wall_ns
        self.idle_cpu_ns += cpu_ns
        self.idle_wall_ns += wall_ns
        self.idle_basis_ns += basis
        allowed = IDLE_SLACK_NS + IDLE_SHARE * basis
        total_allowed = IDLE_SLACK_NS + IDLE_SHARE * self.idle_basis_ns
        if cpu_ns <= allowed and self.idle_cpu_ns > total_allowed:
            cpu_ns, wall_ns, allowed = self.idle_cpu_ns, self.idle_wall_ns, total_allowed
        if cpu_ns > allowed:
            raise Stop(
                "cheat_detected:background_work",
                f"case {self.case.name!r}: while the reference's units were timed ({wall_ns / 1e6:.1f} ms) the "
                f"candidate's process, waiting for its next request, used {cpu_ns / 1e6:.1f} ms of CPU (at most "
                f"{allowed / 1e6:.1f} ms allowed): work done off the clock or taken from the reference's cores "
                "(read from /proc/PID/task/*/schedstat by the harness)",
            )

    def _check_cpu(self, cpu_ns: int, wall_ns: int) -> None:
        allowed = wall_ns * self.ev.threads * CPU_SLACK + 2e6
        if cpu_ns > allowed:
            raise Stop(
                "cheat_detected:thread_count",
                f"case {self.case.name!r}: during a timed unit the candidate's process used {cpu_ns / 1e6:.1f} ms of CPU "
                f"in {wall_ns / 1e6:.1f} ms, more than {self.ev.threads} thread(s) can (its process CPU clock, exited threads included, read by the harness)",
            )
        if not self.ev.target.check_native_threads:  # CUDA/Triton runtimes start threads of their own
            return
        tasks = len(self.ev.cand.tasks())
        limit = self.ev.task_threads + 2 * max(0, self.ev.threads - 1) + 2
        if tasks > limit:
            raise Stop(
                "cheat_detected:thread_count",
                f"case {self.case.name!r}: the candidate's process runs {tasks} threads; at {self.ev.threads} thread(s) "
                f"the harness allows {limit} (read from /proc/PID/task by the harness)",
            )

    # -- the loop ----------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self._run()
        finally:
            for sampler in self.samplers.values():
                sampler.close()

    def _run(self) -> None:
        ev, result = self.ev, self.ev.results[self.case.index]
        for who in ("ref", "cand"):  # the cost of an empty round trip, taken off every measurement
            costs = sorted(self._unit(who, []) for _ in range(5))
            self.overhead_ns[who] = costs[len(costs) // 2]
        # warm-up (not fetched, not recorded), which also sizes the unit (docs/harness-workers.md, "Timing from
        # outside, adaptively"): n grows until a unit lasts unit_ms and UNIT_OVERHEADS round trips
        target = max(self.budget.unit_ms * 1e6, UNIT_OVERHEADS * max(self.overhead_ns.values()))
        n, warm_ms, units = 1, 0.0, 0
        while True:
            seeds = self._fresh_seeds(n)
            self._both(self._prepare_message(seeds))
            raw = {who: self._go(who, True) for who in ("ref", "cand")}
            units += 1
            warm_ms += min(raw.values()) / 1e6
            grown = next_unit_size(n, min(raw.values()), max(raw.values()), target)
            if time.monotonic() > self.deadline or (
                grown is None and units >= 2 and (warm_ms >= self.budget.warmup_ms or units >= 3)
            ):
                break
            n = grown or n
        self._warm_ring()
        self._open_samplers()
        rep = 0
        seeds = self._fresh_seeds(n)
        self._open_prepare()
        self._both(self._prepare_message(seeds))
        self._close_prepare()
        while True:
            order = ("ref", "cand") if rep % 2 == 0 else ("cand", "ref")
            # both workers prepare and fetch at once; each unit is timed alone, the other worker idle (ibid.)
            for who in order:
                took = self._go(who, True, sampled=True)
                if who == "cand":
                    self._quiet_after_go()
                # the round trip's cost taken off, never more than half of the unit (ibid.)
                ns = took - min(self.overhead_ns[who], took / 2)
                self.samples[who].append(ns / 1e6 / n)
                self.spent_ms[who] += ns / 1e6
                self.calls[who] += n
            fetched, blocks = self._fetch_both()
            rep += 1
            done = self._done(rep)
            following = None if done else self._fresh_seeds(n)
            if following is not None:  # the workers build the next unit's inputs while this process compares
                self._open_prepare()
                self._send_both(self._prepare_message(following))
            try:
                ok = self._compare_unit(seeds, fetched, blocks)
            except BaseException:
                if following is not None:
                    self._drain_both()
                raise
            if not ok:
                if following is not None:
                    self._drain_both()
                return
            if following is None:
                break
            self._receive_both()
            self._close_prepare()
            seeds = following
        self._judge_samples()  # after the measured units, whose outputs were compared first
        self._judge_untimed()
        from harness.timing import median_ci

        result.ref_ms = TimingStats.from_samples(self.samples["ref"], median_ci(self.samples["ref"]))
        result.cand_ms = TimingStats.from_samples(self.samples["cand"], median_ci(self.samples["cand"]))
        result.speedup = result.ref_ms.median / result.cand_ms.median if result.cand_ms.median > 0 else None
        ev.trace(f"case {self.case.name}: {rep} units of {n} call(s)")

    def _open_samplers(self) -> None:
        """perf-event samplers on every thread of both workers, on only around their measured units
        (docs/harness-workers.md, "Reference calls below Python")."""
        from harness import native_probe

        for who in ("cand", "ref"):
            try:
                self.samplers[who] = native_probe.Sampler(self.workers[who].pid, PROBE_PERIOD_NS, enabled=False)
            except OSError as exc:
                self.ev.trace(f"native probe unavailable for the {who} worker: {exc}")
                if who == "cand":
                    _warn_probe_unavailable(exc)
                    return

    def _judge_samples(self) -> None:
        """Time in libtorch's or a BLAS library's compute code during the candidate's timed calls is the reference's
        work (the share and budget rules: docs/harness-workers.md, "Reference calls below Python")."""
        sampler = self.samplers.get("cand")
        if sampler is None:
            return
        profile = sampler.profile()
        ref_sampler = self.samplers.get("ref")
        ref_profile = ref_sampler.profile() if ref_sampler is not None else None
        self.ev.trace(
            f"case {self.case.name}: native probe {profile.samples} samples: {profile.top()}"
            + (f"; reference worker {ref_profile.samples} samples: {ref_profile.top()}" if ref_profile else "")
        )
        used = profile.reference_samples
        ref_used = ref_profile.reference_samples if ref_profile is not None else None
        budget = allowance = None
        if budget_applies(used, profile.reference_share_of_all, ref_used):
            allowance = self._dispatch_allowance_ns() * self.calls["cand"] / PROBE_PERIOD_NS
            budget = libtorch_budget(ref_used or 0, allowance)
        self.ev.trace(
            f"case {self.case.name}: {used} libtorch samples ({profile.reference_share_of_all:.1%} of all), the "
            f"reference's {ref_used}; budget " + (f"{budget:.0f}" if budget is not None else "not applied")
        )
        if budget is not None and used > budget:
            why = (
                f"{used} samples of its timed calls' CPU time lay in libtorch's, numpy's or a BLAS library's compute "
                f"code, more than the budget of {budget:.0f} ({REFERENCE_BUDGET:.0%} of the "
                f"{ref_used} samples the reference's own {self.calls['ref']} calls spent there, plus {allowance:.0f} "
                f"for {self.calls['cand']} calls' own allocations as calibrated on this machine; "
                f"{profile.reference_share_of_all:.0%} of all its samples)"
            )
        elif profile.native_samples >= PROBE_MIN_SAMPLES and profile.reference_share > PROBE_LIMIT:
            why = (
                f"{profile.reference_share:.0%} of the candidate's native forward time was spent in libtorch's, "
                "numpy's or a BLAS library's compute code"
            )
        else:
            return
        self.ev.results[self.case.index].error = f"native samples: {profile.top()}"
        raise Stop(
            "cheat_detected:reference_call",
            f"case {self.case.name!r}: {why} ({profile.top()}; {profile.samples} samples of every thread, those started "
            "later included, taken from outside its process with perf events by the harness's native probe): the "
            "reference's work, reached below Python",
        )

    def _dispatch_allowance_ns(self) -> float:
        """The libtorch CPU time an honest kernel's call of this case may spend on its own allocations: calibrated
        in the reference worker, sampled from outside (once per process and target: harness.dispatch_allowance)."""
        from harness import dispatch_allowance

        ev = self.ev
        key = (ev.target.name, ev.target.device, ev.threads, bool(ev.options.deployed))
        found = dispatch_allowance.cached(key)
        if found is None and "ref" in self.samplers:  # perf events work for this user here
            found = dispatch_allowance.calibrate(key, ev.ref.pid, PROBE_PERIOD_NS, lambda r: self._ask("ref", r)[0])
            ev.trace(
                f"case {self.case.name}: dispatch allowance calibrated: {found.samples} libtorch samples over "
                f"{found.calls} calls: {found.ns_per_output / 1e3:.2f} us an output"
            )
        return dispatch_allowance.allowance_ns(found, self.outputs_per_call)

    def _done(self, rep: int) -> bool:
        from harness.timing import enough_repetitions

        if time.monotonic() > self.deadline:
            return True
        return enough_repetitions(self.budget, rep, self.spent_ms, self.samples, time.monotonic() - self.began)

    def _check_seeds(self, wanted: list[int], fetched: tuple[ipc.Reply, list]) -> None:
        reply = ipc.expect(fetched[0], ipc.Fetched)
        got = [i.get("seed") for i in reply.items if isinstance(i, dict)]
        if got != wanted:
            raise Stop(
                "cheat_detected:missing_trials",
                f"case {self.case.name!r}: asked for timed calls with seeds {list(wanted)}, the candidate's worker "
                f"returned outputs for {got}",
            )

    def _compare_unit(self, seeds: list[int], fetched: dict[str, tuple[ipc.Reply, list]], blocks: Any = None) -> bool:
        from harness.fast_compare import compare_encoded
        from harness.guards import sealed_mismatch

        ev, result = self.ev, self.ev.results[self.case.index]
        self._check_seeds(seeds, fetched["cand"])
        (cand_reply, cand_tensors), (ref_reply, ref_tensors) = fetched["cand"], fetched["ref"]
        cand, ref = ipc.expect(cand_reply, ipc.Fetched), ipc.expect(ref_reply, ipc.Fetched)
        if ref.items and isinstance(ref.items[0], dict):  # the native probe's allowance is per output tensor
            from harness.dispatch_allowance import count_tensors

            self.outputs_per_call = count_tensors(ref.items[0].get("output"))
        changed = sealed_mismatch(self.sealed, cand_tensors)  # sealed right after its timed calls returned
        if changed is not None:
            result.error = f"timed calls: {changed} (random elements sealed inside the timed request, read at fetch)"
            raise Stop(
                "cheat_detected:lazy_output",
                f"case {self.case.name!r}: {result.error}: the work must finish inside forward",
            )
        if cand.reused and not ref.reused:
            result.error = f"timed calls: {cand.reused}, but the reference returns new memory on every call"
            raise Stop("cheat_detected:output_reuses_buffer", f"case {self.case.name!r}: {result.error}")
        # with blocks only theirs were read: their values are what is compared
        sampled = blocks and [[gather(t, b) for t, b in zip(ts, blocks)] for ts in (cand_tensors, ref_tensors)]
        for ref_item, cand_item in zip(ref.items, cand.items):
            precise = ev.precise_reference(self.case, ref_item["seed"], ref_item.get("output"), blocks)
            verdict = compare_encoded(
                cand_item.get("output"), cand_tensors, ref_item, ref_tensors, ev.target.device, sampled, precise
            )
            result.tolerance = verdict.rule or result.tolerance
            if not verdict.ok:
                result.passed = False
                result.error = f"timed call on seed {cand_item['seed']}: {verdict.message}"
                if sampled is not None:
                    result.error += " (among the elements the harness drew after the call returned)"
                ev.case_kinds[self.case.index] = "incorrect:timed_mismatch"
                return False
        return True


def join_output(*parts: str | None) -> str:
    return "\n".join(p.strip("\n") for p in parts if p and p.strip())
