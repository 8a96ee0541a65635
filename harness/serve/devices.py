"""The worker service's devices: a queue, evaluator processes and a lock per device; quarantine.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import settings
from harness.remote import scrub_secrets
from harness.serve.quarantine import ProbeResult, probe_env, result_texts, run_probe, sticky_signature

EXECUTOR_BOOT_S = 300.0
KIND_TARGETS = {"cpu": ("cpu",), "cuda": ("cuda", "triton")}  # importing torch on a busy host can be slow


class ExecutorLost(Exception):
    """An evaluator process died or stopped answering: the evaluation in flight is lost (not the candidate's fault)."""


class Executor:
    """One evaluator process, used by one evaluation at a time."""

    def __init__(self, env: dict[str, str], root: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.serve.executor", str(os.getpid()), str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,  # the service's own stderr: the harness's log lines
            env=env,
            text=True,
            bufsize=1,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._next_id = 0
        threading.Thread(target=self._read, daemon=True, name=f"executor-{self.proc.pid}").start()
        ready = self._reply(EXECUTOR_BOOT_S, "starting")
        if not ready.get("ready"):
            self.kill()
            raise ExecutorLost(f"the evaluator process sent {ready!r} instead of its ready line")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _reply(self, timeout: float, doing: str) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            self.kill()
            raise ExecutorLost(f"the evaluator process gave no answer within {timeout:.0f} s while {doing}") from None
        if line is None:
            code = self.proc.wait()
            raise ExecutorLost(f"the evaluator process (pid {self.proc.pid}) exited with status {code} while {doing}")
        return json.loads(line)

    def run(self, payload: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Evaluate one request (blocking); ``{"outcome": ...}`` or ``{"error": ...}``, else ``ExecutorLost``."""
        self._next_id += 1
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps({"id": self._next_id, "payload": payload}) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            code = self.proc.poll()
            raise ExecutorLost(f"the evaluator process (pid {self.proc.pid}) is gone (status {code})") from None
        reply = self._reply(timeout, "evaluating")
        if reply.get("id") != self._next_id:
            self.kill()
            raise ExecutorLost(f"the evaluator process answered request {reply.get('id')}, not {self._next_id}")
        result = reply["result"]
        if "internal_error" in result:
            raise ExecutorLost(f"the harness failed: {result['internal_error']}\n{result.get('traceback', '')}")
        return result

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: it closes the harness workers of the evaluation in flight
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None and self.proc.stdin is not None:
            try:
                self.proc.stdin.write(json.dumps({"op": "exit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=20)
            except (BrokenPipeError, OSError, subprocess.TimeoutExpired):
                pass
        self.kill()


@dataclass
class Device:
    name: str  # "cpu", "cuda:0"
    kind: str  # "cpu" | "cuda"
    index: int | None
    slots: int
    env: dict[str, str]
    root: Path
    targets: tuple[str, ...] = ()
    hardware: dict[str, dict[str, Any]] = field(default_factory=dict)
    state: str = "starting"  # starting | ok | quarantined
    reason: str | None = None
    quarantined_at: float | None = None
    waiting: int = 0
    running: int = 0
    evaluations: int = 0
    lost: int = 0  # evaluations whose evaluator process died
    sticky_errors: int = 0  # sticky signatures seen whose probe passed (the candidate's own error)
    executors: list[Executor] = field(default_factory=list)
    idle: asyncio.Queue[Executor | None] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "state": self.state,
            "reason": self.reason,
            "quarantined_at": self.quarantined_at,
            "targets": list(self.targets),
            "slots": self.slots,
            "queued": self.waiting,
            "running": self.running,
            "evaluations": self.evaluations,
            "lost": self.lost,
            "sticky_errors": self.sticky_errors,
            "hardware": self.hardware,
        }


class Quarantined(Exception):
    """The device is out of service (the reason says why)."""


def device_env(base: dict[str, str], kind: str, index: int | None, cache: Path, name: str) -> dict[str, str]:
    env = probe_env(scrub_secrets(base))
    env[settings.CACHE] = str(cache / "harness")
    env["TORCH_EXTENSIONS_DIR"] = str(cache / "torch-extensions")
    env["TRITON_CACHE_DIR"] = str(cache / "triton")
    (cache / "locks").mkdir(parents=True, exist_ok=True)
    env[settings.DEVICE_LOCK] = str(cache / "locks" / f"{name.replace(':', '-')}.lock")
    if kind == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = str(index)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Devices:
    """Every device of the service: start-up, routing a target to a device, evaluation, quarantine."""

    def __init__(
        self,
        gpus: list[int],
        cache: Path,
        *,
        cpu_slots: int = 1,
        gpu_slots: int = 2,
        probe_command: str | None = None,
        eval_timeout_s: float = 7200.0,
        environ: dict[str, str] | None = None,
    ) -> None:
        base = dict(os.environ if environ is None else environ)
        self.cache = cache
        self.probe_command = probe_command
        self.eval_timeout_s = eval_timeout_s
        self.devices = [Device("cpu", "cpu", None, cpu_slots, device_env(base, "cpu", None, cache, "cpu"), cache)]
        for i in gpus:
            name = f"cuda:{i}"
            self.devices.append(Device(name, "cuda", i, gpu_slots, device_env(base, "cuda", i, cache, name), cache))
        self.log: list[dict[str, Any]] = []  # quarantine events, newest last

    # -- start and stop ------------------------------------------------------------------------------
    def start(self) -> None:
        """Probe every device and start its evaluator processes (blocking; before the service answers)."""
        for device in self.devices:
            result = run_probe(device.kind, device.env, self.probe_command)
            if not result.ok:
                device.targets = KIND_TARGETS[device.kind]  # so its requests are answered "quarantined"
                self._mark_quarantined(device, "probe failed at start-up", result)
                continue
            device.targets, device.hardware = result.targets, result.hardware or {}
            device.executors = [Executor(device.env, device.root / "evaluations") for _ in range(device.slots)]
            device.state = "ok"
        if len(self.devices) > 1:  # with GPUs, triton means a GPU: never the CPU interpreter instead
            cpu = self.devices[0]
            cpu.targets = tuple(t for t in cpu.targets if t != "triton")

    def bind(self) -> None:
        """Create the idle queues in the running event loop."""
        for device in self.devices:
            device.idle = asyncio.Queue()
            for executor in device.executors:
                device.idle.put_nowait(executor)

    def close(self) -> None:
        for device in self.devices:
            for executor in device.executors:
                executor.close()
            device.executors = []

    # -- routing -------------------------------------------------------------------------------------
    def serving(self, target: str) -> list[Device]:
        """The devices for ``target`` (GPUs for cuda and triton when there are any; else the CPU), healthy or not."""
        return [d for d in self.devices if target in d.targets]

    def targets(self) -> list[str]:
        names: list[str] = []
        for device in self.devices:
            names += [t for t in device.targets if t not in names]
        return names

    def queued(self) -> int:
        return sum(d.waiting for d in self.devices)

    def pick(self, target: str) -> Device | None:
        """The least busy healthy device for ``target``; None when there is no device for it at all.
        Raises ``Quarantined`` when every such device is quarantined."""
        candidates = self.serving(target)
        if not candidates:
            return None
        healthy = [d for d in candidates if d.state == "ok"]
        if not healthy:
            raise Quarantined("; ".join(f"{d.name}: {d.reason}" for d in candidates))
        return min(healthy, key=lambda d: (d.waiting + d.running) / d.slots)

    # -- one evaluation ------------------------------------------------------------------------------
    async def evaluate(self, device: Device, payload: dict[str, Any]) -> dict[str, Any]:
        """Queue on ``device`` and evaluate; raises ``ExecutorLost`` or ``Quarantined`` for infrastructure faults."""
        assert device.idle is not None
        device.waiting += 1
        try:
            executor = await device.idle.get()
        finally:
            device.waiting -= 1
        if executor is None or device.state != "ok":
            raise Quarantined(f"{device.name}: {device.reason}")
        device.running += 1
        replace = False
        try:
            result = await asyncio.to_thread(executor.run, payload, self.eval_timeout_s)
        except ExecutorLost:
            replace = True
            if device.state != "ok":  # killed because the device was quarantined meanwhile
                raise Quarantined(f"{device.name}: {device.reason}") from None
            device.lost += 1
            raise
        finally:
            device.running -= 1
            if device.state == "ok":
                await self._give_back(device, executor, replace)
        device.evaluations += 1
        signature = sticky_signature(result_texts(result))
        if signature is not None:
            probe = await asyncio.to_thread(run_probe, device.kind, device.env, self.probe_command)
            if not probe.ok:
                await self.quarantine(device, f"sticky error {signature}", probe)
                raise Quarantined(f"{device.name}: {device.reason}")
            device.sticky_errors += 1
        return result

    async def _give_back(self, device: Device, executor: Executor, replace: bool) -> None:
        assert device.idle is not None
        if replace or not executor.alive():
            await asyncio.to_thread(executor.kill)
            device.executors.remove(executor)
            try:
                fresh = await asyncio.to_thread(Executor, device.env, device.root / "evaluations")
            except ExecutorLost as exc:
                await self.quarantine(device, "a new evaluator process did not start", ProbeResult(False, str(exc)))
                return
            device.executors.append(fresh)
            executor = fresh
        device.idle.put_nowait(executor)

    async def quarantine(self, device: Device, why: str, probe: ProbeResult) -> None:
        """Take ``device`` out of service: waiting requests are answered at once, its evaluator processes end."""
        if device.state == "quarantined":
            return
        executors = self._mark_quarantined(device, why, probe)
        assert device.idle is not None
        for _ in range(device.waiting + device.slots):
            device.idle.put_nowait(None)  # wakes every request queued on the device
        for executor in executors:
            await asyncio.to_thread(executor.kill)  # their pooled reference workers may hold the broken device

    def _mark_quarantined(self, device: Device, why: str, probe: ProbeResult) -> list[Executor]:
        device.state = "quarantined"
        device.reason = f"{why}; {probe.detail}"
        device.quarantined_at = time.time()
        self.log.append({"device": device.name, "reason": device.reason, "at": device.quarantined_at})
        print(
            f"kope worker: device {device.name} QUARANTINED: {device.reason} (restart the worker once it is fixed)",
            file=sys.stderr,
            flush=True,
        )
        executors, device.executors = device.executors, []
        return executors

    def health(self) -> dict[str, Any]:
        ok = [d for d in self.devices if d.state == "ok"]
        return {
            "status": "ok" if len(ok) == len(self.devices) else ("degraded" if ok else "quarantined"),
            "targets": self.targets(),
            "queue_depth": self.queued(),
            "running": sum(d.running for d in self.devices),
            "devices": [d.to_dict() for d in self.devices],
            "quarantine_log": list(self.log),
            "hardware": {t: self.pick_hardware(t) for t in self.targets()},
        }

    def pick_hardware(self, target: str) -> dict[str, Any] | None:
        for device in self.serving(target):
            if target in device.hardware:
                return device.hardware[target]
        return None
