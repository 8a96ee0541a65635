"""Evaluation on worker services (``python -m harness serve`` / ``kope worker``) over HTTP.

Each evaluation goes to the least busy worker that serves the target (its ``/health``
says so), as one ``POST /evaluate`` carrying the candidate's source, the task file's
content and hash, and the options (``kope.boundary.remote_request``), with the workers'
bearer key (``KOPE_WORKER_KEY``). What comes back is the worker's ``kope.outcome/1``.

Infrastructure faults are their own kind (``kope.boundary.INFRASTRUCTURE_KINDS``):
no connection (``unreachable``; httpx's transport retries the connection first), the
worker or its evaluator process died during the evaluation (``worker_lost``), its
device is quarantined (``quarantined``), its queue is full (``busy``), no answer in
time (``timeout``), any other 5xx (``server_error``). Each is retried on another worker
(tenacity: ``attempts`` tries, a short exponential back-off); when every try failed, the
evaluation ends in ``InfrastructureError``: reported, never recorded as an outcome.
A wrong key (401) is a configuration error and is not retried.
"""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from kope.boundary import INFRASTRUCTURE_KINDS, Hardware, Outcome, remote_error, remote_request
from kope.errors import EvaluatorAuthError, InfrastructureError, UsageError
from kope.evaluators.spec import EvaluatorSpec

if TYPE_CHECKING:
    from kope.boundary import EvalOptions

log = logging.getLogger("kope.evaluators")
CONNECT_TIMEOUT_S = 10.0
HEALTH_TIMEOUT_S = 30.0


class TransportFailure(Exception):
    """One try failed for a reason of the infrastructure (retried on another worker)."""

    def __init__(self, url: str, kind: str, message: str) -> None:
        super().__init__(f"{url}: {kind}: {message}")
        self.url, self.kind, self.message = url, kind, message


class HttpEvaluator:
    def __init__(self, spec: EvaluatorSpec, key: str | None, *, timeout_s: float, attempts: int) -> None:
        if not key:
            raise EvaluatorAuthError(
                "evaluating on workers needs their key: set KOPE_WORKER_KEY (the key the workers were started with)"
            )
        self.spec = spec
        self.urls = list(spec.urls)
        self.attempts = attempts
        self.timeout_s = timeout_s
        self.client = httpx.Client(
            headers={"Authorization": f"Bearer {key}"},
            timeout=httpx.Timeout(timeout_s, connect=CONNECT_TIMEOUT_S),
            transport=httpx.HTTPTransport(retries=2),  # connection attempts only: a refused or reset connect
        )
        self._turn = itertools.count()
        self._hardware: dict[str, Hardware] = {}

    def close(self) -> None:
        self.client.close()

    def prestart(self, target: str) -> None:
        """Nothing to do: each worker service keeps its own warm workers."""

    def __enter__(self) -> HttpEvaluator:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- the workers ---------------------------------------------------------------------------------
    def health(self, url: str) -> dict[str, Any]:
        """A worker's ``/health`` (``TransportFailure`` when it does not answer, ``EvaluatorAuthError`` on 401)."""
        try:
            response = self.client.get(f"{url}/health", timeout=HEALTH_TIMEOUT_S)
        except httpx.TransportError as exc:
            raise TransportFailure(url, "infrastructure:unreachable", _describe(exc)) from None
        self._check_auth(url, response)
        if response.status_code != 200:
            raise TransportFailure(url, "infrastructure:server_error", f"/health answered {response.status_code}")
        health = _json(response)
        if not all(key in health for key in ("devices", "targets", "hardware")):
            raise TransportFailure(url, "infrastructure:server_error", "/health answered without devices and targets")
        return health

    @staticmethod
    def _check_auth(url: str, response: httpx.Response) -> None:
        if response.status_code == 401:
            raise EvaluatorAuthError(
                f"worker {url} rejected the key (HTTP 401)",
                hint="set KOPE_WORKER_KEY to the key the worker was started with",
            )

    def _serving(self, target: str) -> list[tuple[str, dict[str, Any]]]:
        """(url, health) of every answering worker with a healthy device for ``target``."""
        answering, failures = [], []
        for url in self.urls:
            try:
                answering.append((url, self.health(url)))
            except TransportFailure as exc:
                failures.append(exc)
        if not answering:
            raise TransportFailure(
                ",".join(self.urls), "infrastructure:unreachable", "; ".join(f.message for f in failures)
            )
        serving = [(u, h) for u, h in answering if any(_serves(d, target) for d in h["devices"])]
        if not serving:
            offered = sorted({t for _, h in answering for t in h["targets"]})
            quarantined = [u for u, h in answering if any(target in d["targets"] for d in h["devices"])]
            if quarantined:
                raise TransportFailure(
                    ",".join(quarantined), "infrastructure:quarantined", f"every device for {target} is quarantined"
                )
            raise UsageError(
                f"no worker serves the {target} target (the workers offer {', '.join(offered) or 'nothing'})"
            )
        return serving

    def hardware(self, target: str) -> Hardware:
        if target not in self._hardware:
            try:
                serving = self._serving(target)
            except TransportFailure as exc:
                raise InfrastructureError(
                    f"no evaluation worker answers ({exc.message})",
                    kind=exc.kind,
                    hint=f"start one with `kope worker` on the target host; workers: {', '.join(self.urls)}",
                ) from None
            kinds = {h["hardware"][target]["id"]: (u, h["hardware"][target]) for u, h in serving}
            if len(kinds) > 1:
                listed = "; ".join(f"{u}: {hw['class']} [{hw_id}]" for hw_id, (u, hw) in kinds.items())
                raise UsageError(
                    f"the workers for {target} run on different hardware ({listed})",
                    hint="one run's speedups must come from one kind of hardware: give workers of one kind",
                )
            self._hardware[target] = Hardware.from_dict(next(iter(kinds.values()))[1])
        return self._hardware[target]

    def _choose(self, target: str, tried: list[str]) -> str:
        serving = self._serving(target)
        turn = next(self._turn)

        def load(item: tuple[str, dict[str, Any]]) -> tuple[int, float, int]:
            url, health = item
            devices = [d for d in health["devices"] if _serves(d, target)]
            busy = sum(d["queued"] + d["running"] for d in devices) / max(1, sum(d["slots"] for d in devices))
            return (tried.count(url), busy, (self.urls.index(url) - turn) % len(self.urls))

        return min(serving, key=load)[0]

    # -- one evaluation ------------------------------------------------------------------------------
    def evaluate(self, task_path: Path, candidate: Path, options: EvalOptions) -> Outcome:
        payload = remote_request(task_path, candidate, options)
        expected = self.hardware(options.target).id
        tried: list[str] = []
        failures: list[TransportFailure] = []

        def note(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            if isinstance(exc, TransportFailure):
                failures.append(exc)
                log.warning(
                    "evaluation of %s failed on %s (%s); retrying on another worker", candidate.name, exc.url, exc.kind
                )

        retrying = Retrying(
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(multiplier=0.5, max=8),
            retry=retry_if_exception_type(TransportFailure),
            before_sleep=note,
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    url = self._choose(options.target, tried)
                    tried.append(url)
                    outcome = self._post(url, payload)
        except TransportFailure as exc:
            failures.append(exc)
            raise InfrastructureError(
                f"the evaluation of {candidate.name} could not be done on any worker "
                f"({len(failures)} tries: " + "; ".join(str(f) for f in failures) + ")",
                kind=exc.kind,
                hint="nothing was recorded for this step; start or fix a worker, then resume the run",
            ) from None
        if outcome.hardware.id != expected:
            raise UsageError(
                f"worker {url} evaluated on other hardware ({outcome.hardware.class_} [{outcome.hardware.id}]) "
                f"than the run's ({expected})",
                hint="give workers of one kind of hardware",
            )
        return outcome

    def _post(self, url: str, payload: dict[str, Any]) -> Outcome:
        try:
            response = self.client.post(f"{url}/evaluate", json=payload)
        except httpx.TimeoutException as exc:
            kind = "infrastructure:unreachable" if isinstance(exc, httpx.ConnectTimeout) else "infrastructure:timeout"
            raise TransportFailure(url, kind, _describe(exc)) from None
        except httpx.ConnectError as exc:
            raise TransportFailure(url, "infrastructure:unreachable", _describe(exc)) from None
        except httpx.TransportError as exc:  # the connection broke during the evaluation: the worker died
            raise TransportFailure(url, "infrastructure:worker_lost", _describe(exc)) from None
        self._check_auth(url, response)
        body = _json(response)
        if response.status_code == 200 and "outcome" in body:
            return Outcome.from_dict(body["outcome"])
        if response.status_code == 422 and "error" in body:
            raise remote_error(body["error"])
        if response.status_code == 413:
            raise UsageError(f"worker {url} refused the request: {body.get('message', 'too large')}")
        kind = str(body.get("kind"))
        if response.status_code >= 500:
            if kind not in INFRASTRUCTURE_KINDS:
                kind = "infrastructure:server_error"
            raise TransportFailure(url, kind, str(body.get("message") or response.reason_phrase))
        raise UsageError(f"worker {url} answered HTTP {response.status_code}: {body.get('message') or body}")


def _serves(device: dict[str, Any], target: str) -> bool:
    return device["state"] == "ok" and target in device["targets"]


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        return {"message": response.text[:300]}
    return data if isinstance(data, dict) else {"message": str(data)[:300]}


def _describe(exc: httpx.HTTPError) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
