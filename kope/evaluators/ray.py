"""Evaluation on a Ray cluster (``--evaluator ray`` / ``ray://ADDRESS``; the optional extra ``kope[ray]``).

Each evaluation is one Ray task, ``harness.remote.evaluate_on_cluster``, given the same
request an evaluation worker gets over HTTP (``kope.boundary.remote_request``: the task
file's source and hash, the candidate's source, the options a client may choose) and
returning the same ``kope.outcome/1``, with the hardware of the node that ran it. On the
node the task runs the ordinary ``harness.evaluate``: sandboxed single-use candidate
processes, trusted reference workers, every anti-cheat check; Ray only places the task.

Resources (Ray's scheduler decides where, KOPE builds none of its own):

* a ``cpu`` evaluation asks for ``evaluator.ray_cpus`` CPUs, by default as many as the
  smallest node has, so a timed CPU evaluation has a node to itself and never shares its
  cores with another evaluation;
* a ``triton`` / ``cuda`` evaluation asks for one GPU (``num_gpus=1``) and one CPU.

The address: ``ray://HOST:PORT`` connects through Ray Client; ``ray`` connects to the
cluster ``RAY_ADDRESS`` names, else to the one running on this machine (``ray start
--head``). Nothing else starts a cluster: without one, one ``error:`` line says how.

Faults of the cluster are infrastructure faults, never the candidate's: a worker process
or node that dies during an evaluation is retried by Ray itself on the cluster
(``max_retries``: ``evaluator.attempts`` - 1); after that, or when no answer comes within
``evaluator.timeout``, the evaluation ends in ``InfrastructureError`` (reported, not
recorded). An error of the task itself (e.g. KOPE missing on a node) is not retried.

The graph is written by the driver (the ``kope`` process), as for every evaluator.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kope.boundary import Hardware, Outcome, cluster_tasks, remote_error, remote_request
from kope.errors import InfrastructureError, UsageError
from kope.evaluators.spec import EvaluatorSpec

if TYPE_CHECKING:
    from kope.boundary import EvalOptions

log = logging.getLogger("kope.evaluators")
GPU_TARGETS = ("triton", "cuda")
CONNECT_TIMEOUT_S = 5.0
INSTALL_HINT = "install the optional extra: pip install 'kope[ray]' (on the driver and on every node)"


def _check_reachable(address: str) -> None:
    """One clear line at once for an address nothing listens on (Ray itself would retry for minutes)."""
    if address == "auto":
        return
    hostport = address.removeprefix("ray://").rstrip("/")
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise UsageError(f"bad Ray address {address!r}: give HOST:PORT (the head's GCS port) or ray://HOST:PORT")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise UsageError(
            f"no Ray cluster answers at {address} ({exc.strerror or type(exc).__name__})",
            hint="start one with `ray start --head` (it prints the address), or fix --evaluator / RAY_ADDRESS",
        ) from None


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError("the Ray evaluator needs Ray, which is not installed", hint=INSTALL_HINT) from None
    return ray


class RayEvaluator:
    def __init__(self, spec: EvaluatorSpec, *, timeout_s: float, attempts: int, cpus: int | None = None) -> None:
        ray = _ray()
        self.spec = spec
        self.timeout_s = timeout_s
        self.attempts = attempts
        self._hardware: dict[str, Hardware] = {}
        self._owns = not ray.is_initialized()
        if self._owns:
            address = spec.address or os.environ.get("RAY_ADDRESS") or "auto"
            _check_reachable(address)
            try:
                # log_to_driver: the candidate's output stays on the node (it is in the outcome's excerpt)
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = "on this machine" if address == "auto" else f"at {address}"
                raise UsageError(
                    f"no Ray cluster answers {where}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
                    hint="start one with `ray start --head` (and `ray start --address HEAD:PORT` on other nodes), "
                    "or give its address: --evaluator ray://HOST:10001 or RAY_ADDRESS",
                ) from None
        self.cpus = cpus or self._smallest_node_cpus()

    # -- the cluster ---------------------------------------------------------------------------------
    def _nodes(self) -> list[dict[str, Any]]:
        return [n for n in _ray().nodes() if n.get("Alive")]

    def _smallest_node_cpus(self) -> int:
        cpus = [int(n.get("Resources", {}).get("CPU", 0)) for n in self._nodes()]
        cpus = [c for c in cpus if c >= 1]
        if not cpus:
            raise UsageError("the Ray cluster has no node with a CPU to evaluate on")
        return min(cpus)

    def _resources(self, target: str) -> dict[str, float]:
        if target in GPU_TARGETS:
            return {"num_cpus": 1, "num_gpus": 1}
        return {"num_cpus": self.cpus}

    def _check_fits(self, target: str) -> None:
        """A request no node can meet would wait forever: refuse it with one line instead."""
        need = self._resources(target)
        for node in self._nodes():
            have = node.get("Resources", {})
            if have.get("CPU", 0) >= need["num_cpus"] and have.get("GPU", 0) >= need.get("num_gpus", 0):
                return
        if "num_gpus" in need:
            raise UsageError(f"no node of the Ray cluster has a GPU for the {target} target")
        raise UsageError(
            f"no node of the Ray cluster has {need['num_cpus']} CPUs (evaluator.ray_cpus)",
            hint="lower evaluator.ray_cpus (KOPE_EVALUATOR_RAY_CPUS) or add a larger node",
        )

    def _run(self, function: Any, payload: Any, target: str, what: str) -> Any:
        ray = _ray()
        from ray import exceptions as rx

        task = ray.remote(function).options(
            **self._resources(target), max_retries=self.attempts - 1, retry_exceptions=False
        )
        ref = task.remote(payload)
        try:
            return ray.get(ref, timeout=self.timeout_s)
        except rx.GetTimeoutError:
            ray.cancel(ref, force=True)
            raise InfrastructureError(
                f"{what} on the Ray cluster did not finish within {self.timeout_s:.0f} s",
                kind="infrastructure:timeout",
                hint="nothing was recorded for this step; check the cluster (`ray status`), then resume the run",
            ) from None
        except rx.RayTaskError as exc:  # the task itself raised: KOPE or the harness is broken on that node
            cause = exc.cause if getattr(exc, "cause", None) is not None else exc
            raise InfrastructureError(
                f"{what} failed on the Ray cluster: {type(cause).__name__}: {str(cause).splitlines()[-1][:300]}",
                kind="infrastructure:server_error",
                hint="every node needs the same KOPE installed as the driver (" + INSTALL_HINT + ")",
            ) from None
        except rx.RayError as exc:  # a worker or node died, an object was lost, the cluster went away
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise InfrastructureError(
                f"{what} could not be done on the Ray cluster after {self.attempts} tries: "
                f"{type(exc).__name__}: {first[:300]}",
                kind="infrastructure:worker_lost",
                hint="nothing was recorded for this step; fix the cluster, then resume the run",
            ) from None

    # -- the Evaluator protocol --------------------------------------------------------------------
    def hardware(self, target: str) -> Hardware:
        if target not in self._hardware:
            _, hardware_payload = cluster_tasks()
            self._check_fits(target)
            self._hardware[target] = Hardware.from_dict(
                self._run(hardware_payload, target, target, f"the hardware fingerprint for {target}")
            )
        return self._hardware[target]

    def evaluate(self, task_path: Path, candidate: Path, options: EvalOptions) -> Outcome:
        evaluate_on_cluster, _ = cluster_tasks()
        payload = remote_request(task_path, candidate, options)
        expected = self.hardware(options.target).id
        result = self._run(evaluate_on_cluster, payload, options.target, f"the evaluation of {candidate.name}")
        if "error" in result:
            raise remote_error(result["error"])
        outcome = Outcome.from_dict(result["outcome"])
        if outcome.hardware.id != expected:
            raise UsageError(
                f"a Ray node evaluated on other hardware ({outcome.hardware.class_} [{outcome.hardware.id}]) "
                f"than the run's ({expected})",
                hint="one run's speedups must come from one kind of hardware: use a cluster of one kind of node "
                "(or Ray node labels per kind)",
            )
        return outcome

    def prestart(self, target: str) -> None:
        """Nothing to do: the nodes' Ray workers keep their harness workers warm between tasks."""

    def close(self) -> None:
        if self._owns:
            ray = _ray()
            if ray.is_initialized():
                ray.shutdown()
            self._owns = False
