"""``RemoteMemory``: the memory through a shared memory server (``kope serve``), over HTTP.

The same operations as ``ExperienceGraph`` (the memory protocol), so the loop, the context,
the bench and ``kope memory ...`` work unchanged when ``KOPE_MEMORY_URL`` and
``KOPE_MEMORY_TOKEN`` (or ``[memory] url/token``) are set. What differs:

* the server decides: the team is the key's (``KOPE_TEAM`` is not sent), and it says which
  namespaces the key may read and write; without an explicit ``--namespace`` /
  ``KOPE_NAMESPACE`` the key's home namespace is used;
* d(v), labels, incumbents and insights are computed by the server;
* the journal stays local and first: every run start, attempt and run end is appended (and
  fsync'ed) before the request. When the server cannot be reached the result says so
  (``in_graph=False``, ``pending_reason``), this object sends what it held back once the
  server answers again, and ``kope memory sync`` replays whatever the server lacks, in any
  later process (the server's writes are idempotent MERGEs, so nothing is duplicated).

The token is sent only in the ``Authorization`` header; it is never logged, journaled or
written to the graph.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, Any, TypeVar

import httpx

from kope import __version__
from kope.boundary import harness_version
from kope.errors import DatabaseUnavailableError, KopeError, UsageError
from kope.memory import wire
from kope.memory.errors import (
    ExportFormatError,
    InvalidRecordError,
    PruneRefusedError,
    RecordConflictError,
    UnknownDecisionError,
    UnknownRunError,
)
from kope.memory.ids import uid
from kope.memory.insights import DistillReport
from kope.memory.inspect import LineageTree, MemoryStats, UsedInsight
from kope.memory.journal import Journal
from kope.memory.journaling import JournalFirstStore, JournalWriter, knowledge_data
from kope.memory.prune import PruneReport
from kope.memory.recorder import RecordResult, RunResult
from kope.memory.records import OutcomeNodeRecord, RunRecord
from kope.memory.retrieval import RetrievalQuery, RetrievalResult
from kope.memory.schema import SchemaReport
from kope.memory.specs import Attempt, DeployedFigures, KnowledgeDoc, RunSpec
from kope.memory.state import RunState, StepState
from kope.memory.sync import SyncReport, sync_journal
from kope.memory.transfer import TransferReport, read_export
from kope.memory.tuning import TuningData, TuningQuery
from kope.teamweights import check_team_weights

T = TypeVar("T")
log = logging.getLogger("kope.memory")
MAX_RATE_WAIT_S = 30.0


class MemoryServerUnavailableError(DatabaseUnavailableError):
    """No memory server answers (or it cannot reach its graph): the journal keeps what was written."""


class MemoryAccessError(KopeError):
    """The memory server refused the key (401) or the operation (403)."""

    exit_code = 15


class NamespaceUnknownError(UsageError):
    """The memory server has no such namespace that this key may use."""


_ERRORS: dict[str, type[KopeError]] = {
    "unknown_run": UnknownRunError,
    "unknown_decision": UnknownDecisionError,
    "record_conflict": RecordConflictError,
    "prune_refused": PruneRefusedError,
    "invalid_record": InvalidRecordError,
    "invalid_request": InvalidRecordError,
    "export_format": ExportFormatError,
    "unknown_namespace": NamespaceUnknownError,
    "unauthorized": MemoryAccessError,
    "forbidden": MemoryAccessError,
    "graph_unavailable": MemoryServerUnavailableError,
    "bad_request": UsageError,
    "too_large": UsageError,
}


class RemoteMemory(JournalFirstStore):
    """One namespace of a memory server, journaling locally first."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        namespace: str | None = None,
        journal_root: Path | None = None,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
        team_weights: Mapping[str, float] | None = None,
    ) -> None:
        if not token:
            raise UsageError(
                f"a memory server is configured ({url}) but no key: set KOPE_MEMORY_TOKEN",
                hint="the server's operator creates one with `kope serve keys create --team TEAM`",
            )
        self.url = url.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}", "User-Agent": f"kope/{__version__}"},
            timeout=httpx.Timeout(timeout, connect=5.0),
            transport=transport,
        )
        try:
            who = self._get("/v1/whoami")
        except BaseException:
            self._http.close()
            raise
        self.key_id: str = who["key_id"]
        self.team: str = who["team"]
        self.scopes: tuple[str, ...] = tuple(who["scopes"])
        self.namespace: str = namespace or who["home"]
        self.journal = Journal(journal_root, self.namespace) if journal_root is not None else None
        self.harness_version = harness_version()
        self.team_weights = check_team_weights(team_weights or {})  # sent with each retrieval (the server weighs)
        self._init_journal_first()

    @classmethod
    def from_config(cls, config: Any, *, namespace: str | None = None, journal: bool = True) -> RemoteMemory:
        """The server of ``config.memory.url``; the namespace: ``namespace``, else the configured one if it was
        set explicitly (option, KOPE_NAMESPACE, kope.toml), else the key's home namespace."""
        memory = config.memory
        ns = namespace or (memory.namespace if "namespace" in memory.model_fields_set else None)
        return cls(
            memory.url,
            memory.token or "",
            namespace=ns,
            journal_root=config.data_dir / "memory" if journal else None,
            team_weights=memory.team_weights,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RemoteMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def uid(self, local_id: str) -> str:
        return uid(self.namespace, local_id)

    # -- HTTP ----------------------------------------------------------------------------------------
    def _path(self, suffix: str) -> str:
        return f"/v1/namespaces/{self.namespace}{suffix}"

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        waited = 0.0
        while True:
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                if "CERTIFICATE_VERIFY_FAILED" in str(exc):
                    raise MemoryServerUnavailableError(
                        f"the TLS certificate of the memory server at {self.url} is not trusted",
                        hint="set SSL_CERT_FILE to the certificate (or CA bundle) that signed it",
                    ) from None
                raise MemoryServerUnavailableError(
                    f"no KOPE memory server answers at {self.url} ({type(exc).__name__})",
                    hint="start it (`kope serve`) or check KOPE_MEMORY_URL",
                ) from None
            if response.status_code == 429:
                retry = _retry_after(response)
                if waited + retry <= MAX_RATE_WAIT_S:
                    log.info("memory server: rate limited, retrying in %.0f s", retry)
                    time.sleep(retry)
                    waited += retry
                    continue
            if response.status_code >= 400:
                raise self._error(response)
            return response

    def _error(self, response: httpx.Response) -> KopeError:
        try:
            body = response.json()
            message, code, hint = str(body["error"]), str(body.get("code", "")), body.get("hint")
        except (ValueError, KeyError, TypeError):
            message, code, hint = f"HTTP {response.status_code}", "", None
        if response.status_code == 429:
            return KopeError(f"the memory server at {self.url} is rate limiting this key: {message}", hint=hint)
        if code == "graph_unavailable" or response.status_code in (502, 503, 504):
            return MemoryServerUnavailableError(f"the memory server at {self.url} cannot write now: {message}")
        kind = _ERRORS.get(code, KopeError)
        if kind is MemoryAccessError:
            message = f"the memory server at {self.url} refused: {message}"
        return kind(message, hint=hint)

    def _get(self, path: str, **params: Any) -> Any:
        return self._request("GET", path, params=params or None).json()

    def _post(self, path: str, body: Any) -> Any:
        return self._request("POST", path, json=body).json()

    def _get_record(self, kind: type[T], path: str, **params: Any) -> T:
        return wire.load_json(kind, self._request("GET", path, params=params or None).content)

    def _post_record(self, kind: type[T], path: str, body: Any) -> T:
        return wire.load_json(kind, self._request("POST", path, json=body).content)

    # -- plumbing --------------------------------------------------------------------------------
    def init_schema(self) -> SchemaReport:
        """The server applies the schema when it starts; this reports it."""
        return self._get_record(SchemaReport, "/v1/schema")

    def verify(self) -> None:
        self._get("/v1/whoami")

    # -- kope.memory.journaling.JournalFirstStore --------------------------------------------------
    def _send(self, kind: str, item: Any) -> Any:
        if kind == "run":
            return self._send_runs(item)
        if kind == "attempts":
            return self._send_attempts(item)
        if kind == "deployed":
            return self._send_deployed(item)
        return self._send_end(*item)

    def _offline_hint(self) -> str:
        return "run `kope memory sync` once the memory server is back"

    def _send_runs(self, specs: list[RunSpec]) -> list[RunResult]:
        body = {
            "runs": [s.model_dump(mode="json", by_alias=True) for s in specs],
            "harness_version": self.harness_version,
        }
        return self._post_record(list[RunResult], self._path("/runs"), body)

    def _send_attempts(self, batch: list[Attempt], *, relink: bool = False) -> list[RecordResult]:
        body: dict[str, Any] = {"attempts": [a.to_json() for a in batch], "harness_version": self.harness_version}
        if relink:  # attempts the server holds already: restore the relationships they lack (sync)
            body["relink"] = True
        return self._post_record(list[RecordResult], self._path("/attempts"), body)

    def _send_end(
        self, run_id: str, status: str, ended_at: float, distill: bool = False
    ) -> tuple[RunRecord, str | None]:
        data = self._post(
            self._path(f"/runs/{run_id}/finish"), {"status": status, "ended_at": ended_at, "distill": distill}
        )
        return wire.load(RunRecord, data["run"]), data["family"]

    def _send_deployed(self, figures: DeployedFigures) -> str:
        data = self._post(self._path("/deployed"), figures.to_json())
        decision_id: str = data["decision_id"]
        return decision_id

    # -- runs ------------------------------------------------------------------------------------
    def run(self, run_id: str) -> RunRecord:
        return self._get_record(RunRecord, self._path(f"/runs/{run_id}"))

    def run_state(self, run_id: str) -> RunState:
        state: RunState = self._get_record(RunState, self._path(f"/runs/{run_id}/state"))
        self._remember(state)
        return state

    def step_state(self, run_id: str, *, history_code: bool = False) -> StepState:
        """What one optimization step reads: one request (the server reads it in one transaction)."""
        path = self._path(f"/runs/{run_id}/step_state")
        state: StepState = self._get_record(StepState, path, history_code="true" if history_code else "false")
        self._remember(state)
        return state

    # -- reading ---------------------------------------------------------------------------------
    def retrieve(self, query: RetrievalQuery, k: int = 8) -> RetrievalResult:
        if not query.team_weights and self.team_weights:
            query = replace(query, team_weights=self.team_weights)
        body = {"query": {**wire.dump(query), "exclude": list(query.exclude)}, "k": k}
        return self._post_record(RetrievalResult, self._path("/retrieve"), body)

    def tuning_records(self, query: TuningQuery) -> TuningData:
        """The training sample of ``query``: one request (the server reads it in one transaction)."""
        return self._post_record(TuningData, self._path("/tuning_records"), {"query": wire.dump(query)})

    def outcome(self, decision_id: str) -> OutcomeNodeRecord:
        return self._get_record(OutcomeNodeRecord, self._path(f"/decisions/{decision_id}/outcome"))

    def kernel_source(self, decision_id: str) -> str | None:
        source: str | None = self._get(self._path(f"/decisions/{decision_id}/kernel"))["source"]
        return source

    def present(self, kind: str, uids: Sequence[str]) -> list[dict[str, Any]]:
        prefix = f"{self.namespace}/"
        ids = [u[len(prefix) :] if u.startswith(prefix) else u for u in uids]
        rows: list[dict[str, Any]] = self._post(self._path("/present"), {"kind": kind, "ids": ids})
        return rows

    # -- insights and knowledge ------------------------------------------------------------------
    def distill(self, family: str | None = None) -> DistillReport:
        """Have the server distil one family (None: every family); journaled, so a replay distils here too."""
        if self.journal is not None:
            JournalWriter(self.journal).distill(family)
        return self._distill(family)

    def _distill(self, family: str | None) -> DistillReport:
        return self._post_record(DistillReport, self._path("/distill"), {"family": family})

    def upsert_knowledge(self, docs: Iterable[KnowledgeDoc | dict[str, Any]]) -> int:
        """Knowledge documents (journaled first, each version once, so a replay can restore every USED edge)."""
        parsed = [KnowledgeDoc.parse(d) for d in docs]
        if not parsed:
            return 0
        if self.journal is not None:
            JournalWriter(self.journal).knowledge(parsed)
        return self._send_knowledge([knowledge_data(d) for d in parsed])

    def _send_knowledge(self, docs: Sequence[dict[str, Any]]) -> int:
        return int(self._post(self._path("/knowledge"), {"docs": list(docs)})["written"])

    # -- maintenance -----------------------------------------------------------------------------
    def sync(self, operator: str | None = None, *, dry_run: bool = False) -> SyncReport:
        if self.journal is None:
            raise UsageError("this RemoteMemory has no journal to sync from")
        return sync_journal(self, self.journal, operator=operator, dry_run=dry_run)

    # -- kope.memory.sync.SyncTarget -------------------------------------------------------------
    def replay_runs(self, items: Sequence[tuple[RunSpec, str]]) -> None:
        self._send_runs([spec for spec, _team in items])  # the server stamps the key's team

    def replay_attempts(self, batch: Sequence[Attempt], *, relink: bool = False) -> list[RecordResult]:
        return self._send_attempts(list(batch), relink=relink)

    def replay_end(self, run_id: str, status: str, ended_at: float) -> str | None:
        return self._send_end(run_id, status, ended_at)[1]

    def replay_knowledge(self, docs: Sequence[dict[str, Any]]) -> None:
        self._send_knowledge(docs)

    def replay_deployed(self, figures: DeployedFigures) -> None:
        self._send_deployed(figures)

    def distill_family(self, family: str | None) -> None:
        self._distill(family)

    def replay_import(self, text: str, source: str, *, distill: bool) -> None:
        self._send_import(text, distill)

    def journal_dir(self) -> Path | None:
        return self.journal.root if self.journal else None

    def stats(self) -> MemoryStats:
        stats = self._get_record(MemoryStats, self._path("/stats"))
        entries = None
        if self.journal is not None:
            entries = 0
            for path in self.journal.wal_files():
                with open(path, "rb") as handle:
                    entries += sum(1 for line in handle if line.strip())
        return MemoryStats(**{**stats.__dict__, "journal_entries": entries})

    def run_evidence(self, run_id: str) -> dict[str, dict[str, int]]:
        evidence: dict[str, dict[str, int]] = self._get(self._path(f"/runs/{run_id}/evidence"))
        return evidence

    def insights_used(self, run_id: str) -> dict[str, list[UsedInsight]]:
        return self._get_record(dict[str, list[UsedInsight]], self._path(f"/runs/{run_id}/insights_used"))

    def lineage(self, decision_id: str, limit: int = 200) -> LineageTree:
        return self._get_record(LineageTree, self._path(f"/decisions/{decision_id}/lineage"), limit=limit)

    def export_to(self, out: IO[str]) -> TransferReport:
        text = self._request("GET", self._path("/export")).text
        report = TransferReport(self.namespace)
        for line in text.splitlines():
            obj = json.loads(line) if line.strip() else {}
            if "node" in obj:
                report.nodes[obj["node"]] = report.nodes.get(obj["node"], 0) + 1
            elif "rel" in obj:
                report.relationships[obj["rel"]] = report.relationships.get(obj["rel"], 0) + 1
        out.write(text)
        return report

    def import_from(self, stream: IO[str], source: str = "<input>", *, distill: bool = True) -> TransferReport:
        """Import an export through the server (journaled first, with the file: a replay imports it again)."""
        text = read_export(stream, source)
        if self.journal is not None:
            JournalWriter(self.journal).import_(text, source, distill=distill)
        return self._send_import(text, distill)

    def _send_import(self, text: str, distill: bool) -> TransferReport:
        response = self._request(
            "POST",
            self._path("/import"),
            content=text.encode("utf-8"),
            params={"distill": "true" if distill else "false"},
            headers={"Content-Type": "application/x-ndjson"},
        )
        return wire.load_json(TransferReport, response.content)

    def prune(
        self,
        run_ids: Sequence[str] = (),
        *,
        older_than_days: float | None = None,
        everything: bool = False,
        dry_run: bool = False,
    ) -> PruneReport:
        body = {
            "run_ids": list(run_ids),
            "older_than_days": older_than_days,
            "everything": everything,
            "dry_run": dry_run,
        }
        return self._post_record(PruneReport, self._path("/prune"), body)


def _retry_after(response: httpx.Response) -> float:
    try:
        return max(0.0, float(response.headers.get("Retry-After", "1")))
    except ValueError:
        return 1.0
