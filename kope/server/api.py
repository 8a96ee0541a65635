"""The REST API (``/v1``): what ``RemoteMemory`` calls, one route per memory operation.

Every route names its namespace in the path; ``acl.authorize`` decides whether the key's team
may read, write or administer it (the body never names a team or a namespace: the models
forbid unknown fields). Bodies are validated by the memory's own record types (``RunSpec``,
``Attempt``, ...); results are the memory's records as JSON (``kope.memory.wire``).
"""

from __future__ import annotations

import io
import json
import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, FastAPI, Path, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator

from kope.memory import wire
from kope.memory.ids import check_local_id
from kope.memory.inspect import UsedInsight
from kope.memory.journaling import RUN_STATUSES
from kope.memory.recorder import RecordResult, RunResult
from kope.memory.retrieval import RetrievalQuery
from kope.memory.specs import Attempt, DeployedFigures, KnowledgeDoc, RunSpec
from kope.memory.state import RunState, StepState
from kope.memory.tuning import DEFAULT_LIMIT, TuningQuery
from kope.server import acl
from kope.server.auth import Identity
from kope.server.errors import ForbiddenError
from kope.server.registry import NAME, Registry
from kope.server.store import MemoryStore
from kope.teamweights import check_team_weights

NS = Annotated[str, Path(pattern=NAME.pattern, description="a namespace (1-64 letters, digits, _ . -)")]
LocalId = Annotated[str, Path(min_length=1, max_length=200, description="a run or decision id")]
MAX_BATCH = 1000
HARNESS_VERSION = r"^[A-Za-z0-9][A-Za-z0-9_.+\-]{0,39}$"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RunsBody(_Body):
    runs: list[RunSpec] = Field(min_length=1, max_length=MAX_BATCH)
    harness_version: str | None = Field(default=None, pattern=HARNESS_VERSION)


class AttemptsBody(_Body):
    attempts: list[Attempt] = Field(min_length=1, max_length=MAX_BATCH)
    harness_version: str | None = Field(default=None, pattern=HARNESS_VERSION)
    relink: bool = False  # journal sync: restore the relationships of attempts recorded before with this content


class FinishBody(_Body):
    status: Literal[RUN_STATUSES] = "finished"  # type: ignore[valid-type]  # Literal of a tuple: pydantic accepts it, mypy does not
    ended_at: float | None = Field(default=None, gt=0)
    distill: bool = True


class QueryBody(_Body):
    operator: str = Field(min_length=1, max_length=128)
    family: str | None = Field(default=None, max_length=128)
    target: str | None = Field(default=None, max_length=64)
    hardware_id: str | None = Field(default=None, max_length=128)
    hardware_class: str | None = Field(default=None, max_length=64)
    vendor: str | None = Field(default=None, max_length=128)
    layer: str | None = Field(default=None, max_length=48)
    error_kind: str | None = Field(default=None, max_length=200)
    exclude: list[str] = Field(default_factory=list, max_length=1000)
    shape_sig: str | None = Field(default=None, max_length=200)
    shape_class: str | None = Field(default=None, max_length=200)
    text: str | None = Field(default=None, max_length=20_000)  # only its first plain words are searched
    # (team, weight in [0, 1]) pairs, "*" for the rest; the caller's own team weighs 1 unless named
    team_weights: list[tuple[str, float]] = Field(default_factory=list, max_length=256)

    @field_validator("team_weights")
    @classmethod
    def _check_team_weights(cls, value: list[tuple[str, float]]) -> list[tuple[str, float]]:
        return list(check_team_weights(value))

    def query(self) -> RetrievalQuery:
        dumped = self.model_dump()
        return RetrievalQuery(
            **{**dumped, "exclude": tuple(self.exclude), "team_weights": tuple(map(tuple, self.team_weights))}
        )


class RetrieveBody(_Body):
    query: QueryBody
    k: int = Field(default=8, ge=1, le=100)


class TuningQueryBody(_Body):
    template: str = Field(min_length=1, max_length=128)
    run_id: str = Field(min_length=1, max_length=200)
    operator: str = Field(min_length=1, max_length=128)
    hardware_id: str | None = Field(default=None, max_length=128)
    hardware_class: str | None = Field(default=None, max_length=64)
    vendor: str | None = Field(default=None, max_length=128)
    shape_sig: str | None = Field(default=None, max_length=200)
    shape_class: str | None = Field(default=None, max_length=200)
    run_only: bool = False
    limit: int = Field(default=DEFAULT_LIMIT, ge=1, le=5 * DEFAULT_LIMIT)
    family: str | None = Field(default=None, max_length=128)

    def query(self) -> TuningQuery:
        return TuningQuery(**self.model_dump())


class TuningBody(_Body):
    query: TuningQueryBody


class PresentBody(_Body):
    kind: Literal["run", "attempt", "knowledge", "insight", "edges", "deployed"]
    ids: list[str] = Field(max_length=10_000)


class KnowledgeBody(_Body):
    docs: list[KnowledgeDoc] = Field(max_length=MAX_BATCH)

    @field_validator("docs", mode="before")
    @classmethod
    def _stored_fields_only(cls, docs: Any) -> Any:
        # a client sends what is stored (KnowledgeDoc.STORED): the file and ranking fields stay with the client
        for doc in docs if isinstance(docs, list) else ():
            extra = sorted(set(doc) - set(KnowledgeDoc.STORED)) if isinstance(doc, dict) else []
            if extra:
                raise ValueError(f"unknown field {extra[0]!r} (a document has {', '.join(KnowledgeDoc.STORED)})")
        return docs


class PruneBody(_Body):
    run_ids: list[str] = Field(default_factory=list, max_length=MAX_BATCH)
    older_than_days: float | None = Field(default=None, ge=0)
    everything: bool = False
    dry_run: bool = False


class DistillBody(_Body):
    family: str | None = Field(default=None, max_length=128)


class SharingBody(_Body):
    visibility: Literal["private", "shared", "public"]
    teams: list[str] = Field(default_factory=list, max_length=100)


class NamespaceBody(SharingBody):
    name: str = Field(pattern=NAME.pattern)
    visibility: Literal["private", "shared", "public"] = "private"


def record_response(value: Any, kind: Any = None, status: int = 200) -> Response:
    """A memory record (or list of them) as the response, serialised by pydantic-core in one step."""
    return Response(wire.dump_json(value, kind), status_code=status, media_type="application/json")


def json_response(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data, separators=(",", ":")).encode(), status_code=status, media_type="application/json")


def identity(request: Request) -> Identity:
    who: Identity = request.scope["kope.identity"]
    return who


def note(request: Request, **detail: Any) -> None:
    """Details for this request's audit row (counts, ids): who and when are added by the guard."""
    request.scope.setdefault("kope.audit", {}).setdefault("detail", {}).update(detail)


Who = Annotated[Identity, Depends(identity)]


def build_router(registry: Registry, store: MemoryStore, metrics: Any) -> APIRouter:
    r = APIRouter(prefix="/v1")

    def allow(who: Identity, ns: str, action: str) -> None:
        acl.authorize(registry, who, ns, action, store.holds_data)

    def ids(values: list[str], what: str) -> list[str]:
        return [check_local_id(v, what) for v in values]

    # -- who am I, which namespaces ---------------------------------------------------------------
    @r.get("/whoami", name="whoami")
    def whoami(who: Who) -> Response:
        readable = acl.readable(registry, who)
        return json_response(
            {
                "key_id": who.key_id,
                "team": who.team,
                "scopes": list(who.scopes),
                "home": who.home,
                "readable": [ns.to_dict() for ns in readable],
                "writable": [ns.name for ns in readable if ns.owner == who.team] if who.has("write") else [],
            }
        )

    @r.get("/schema", name="schema")
    def schema(who: Who) -> Response:
        return record_response(store.schema)

    @r.get("/namespaces", name="list_namespaces")
    def namespaces(who: Who) -> Response:
        return json_response([ns.to_dict() for ns in acl.readable(registry, who)])

    @r.post("/namespaces", name="create_namespace", status_code=201)
    def create_namespace(who: Who, request: Request, body: NamespaceBody) -> Response:
        if not who.has("admin"):
            raise ForbiddenError(f"key {who.key_id} has no admin scope: it cannot create namespaces")
        ns = acl.create_for_team(registry, who, body.name, store.holds_data, body.visibility, body.teams)
        request.scope.setdefault("kope.audit", {})["namespace"] = ns.name
        return json_response(ns.to_dict(), 201)

    @r.put("/namespaces/{ns}/sharing", name="set_sharing")
    def set_sharing(who: Who, ns: NS, request: Request, body: SharingBody) -> Response:
        allow(who, ns, "admin")
        note(request, visibility=body.visibility, teams=body.teams)
        return json_response(registry.set_sharing(ns, body.visibility, body.teams).to_dict())

    # -- runs and attempts -----------------------------------------------------------------------------
    @r.post("/namespaces/{ns}/runs", name="start_runs")
    def start_runs(who: Who, ns: NS, request: Request, body: RunsBody) -> Response:
        allow(who, ns, "write")
        results = store.start_runs(ns, who, body.runs, body.harness_version)
        note(request, runs=[x.run_id for x in results], created=sum(x.created for x in results))
        return record_response(results, list[RunResult])

    @r.post("/namespaces/{ns}/attempts", name="record_attempts")
    def record_attempts(who: Who, ns: NS, request: Request, body: AttemptsBody) -> Response:
        allow(who, ns, "write")
        results = store.record_attempts(ns, who, body.attempts, body.harness_version, relink=body.relink)
        created = sum(x.created for x in results)
        metrics.attempts.inc(created)
        note(request, attempts=len(results), created=created)
        return record_response(results, list[RecordResult])

    @r.post("/namespaces/{ns}/runs/{run_id}/finish", name="finish_run")
    def finish_run(who: Who, ns: NS, run_id: LocalId, request: Request, body: FinishBody) -> Response:
        allow(who, ns, "write")
        run, family = store.finish_run(ns, run_id, body.status, body.ended_at or time.time(), distill=body.distill)
        note(request, run=run_id, status=body.status)
        return json_response({"run": wire.dump(run), "family": family})

    @r.post("/namespaces/{ns}/deployed", name="record_deployed")
    def record_deployed(who: Who, ns: NS, request: Request, body: DeployedFigures) -> Response:
        allow(who, ns, "write")
        decision_id = store.record_deployed(ns, body)
        note(request, decision=decision_id, deployed_speedup=body.speedup)
        return json_response({"decision_id": decision_id})

    @r.post("/namespaces/{ns}/present", name="present")
    def present(who: Who, ns: NS, body: PresentBody) -> Response:
        allow(who, ns, "read")
        graph = store.graph(ns)
        return json_response(graph.present(body.kind, [graph.uid(i) for i in ids(body.ids, "id")]))

    @r.post("/namespaces/{ns}/knowledge", name="upsert_knowledge")
    def knowledge(who: Who, ns: NS, body: KnowledgeBody) -> Response:
        allow(who, ns, "write")
        return json_response({"written": store.graph(ns).upsert_knowledge(body.docs)})

    # -- reading -----------------------------------------------------------------------------------------
    @r.get("/namespaces/{ns}/runs/{run_id}", name="get_run")
    def get_run(who: Who, ns: NS, run_id: LocalId) -> Response:
        allow(who, ns, "read")
        return record_response(store.graph(ns).run(check_local_id(run_id, "run id")))

    @r.get("/namespaces/{ns}/runs/{run_id}/state", name="run_state")
    def run_state(who: Who, ns: NS, run_id: LocalId) -> Response:
        allow(who, ns, "read")
        return record_response(store.graph(ns).run_state(check_local_id(run_id, "run id")), RunState)

    @r.get("/namespaces/{ns}/runs/{run_id}/step_state", name="step_state")
    def step_state(who: Who, ns: NS, run_id: LocalId, history_code: Annotated[bool, Query()] = False) -> Response:
        allow(who, ns, "read")
        state = store.graph(ns).step_state(check_local_id(run_id, "run id"), history_code=history_code)
        return record_response(state, StepState)

    @r.get("/namespaces/{ns}/runs/{run_id}/evidence", name="run_evidence")
    def run_evidence(who: Who, ns: NS, run_id: LocalId) -> Response:
        allow(who, ns, "read")
        return json_response(store.graph(ns).run_evidence(check_local_id(run_id, "run id")))

    @r.get("/namespaces/{ns}/decisions/{decision_id}/outcome", name="outcome")
    def outcome(who: Who, ns: NS, decision_id: LocalId) -> Response:
        allow(who, ns, "read")
        return record_response(store.graph(ns).outcome(check_local_id(decision_id, "decision id")))

    @r.get("/namespaces/{ns}/decisions/{decision_id}/kernel", name="kernel")
    def kernel(who: Who, ns: NS, decision_id: LocalId) -> Response:
        allow(who, ns, "read")
        return json_response({"source": store.graph(ns).kernel_source(check_local_id(decision_id, "decision id"))})

    @r.get("/namespaces/{ns}/decisions/{decision_id}/lineage", name="lineage")
    def lineage(
        who: Who, ns: NS, decision_id: LocalId, limit: Annotated[int, Query(ge=1, le=100_000)] = 200
    ) -> Response:
        allow(who, ns, "read")
        return record_response(store.graph(ns).lineage(check_local_id(decision_id, "decision id"), limit))

    @r.post("/namespaces/{ns}/retrieve", name="retrieve")
    def retrieve(who: Who, ns: NS, body: RetrieveBody) -> Response:
        allow(who, ns, "read")
        return record_response(store.graph(ns, who.team).retrieve(body.query.query(), body.k))  # own team: 1

    @r.post("/namespaces/{ns}/tuning_records", name="tuning_records")
    def tuning_records(who: Who, ns: NS, body: TuningBody) -> Response:
        allow(who, ns, "read")
        return record_response(store.graph(ns).tuning_records(body.query.query()))

    @r.get("/namespaces/{ns}/runs/{run_id}/insights_used", name="insights_used")
    def insights_used(who: Who, ns: NS, run_id: LocalId) -> Response:
        allow(who, ns, "read")
        used = store.graph(ns).insights_used(check_local_id(run_id, "run id"))
        return record_response(used, dict[str, list[UsedInsight]])

    @r.get("/namespaces/{ns}/stats", name="stats")
    def stats(who: Who, ns: NS) -> Response:
        allow(who, ns, "read")
        return record_response(store.graph(ns).stats())

    @r.get("/namespaces/{ns}/export", name="export")
    def export(who: Who, ns: NS, request: Request) -> Response:
        allow(who, ns, "read")
        text = store.export(ns)
        note(request, bytes=len(text))
        return Response(text.encode("utf-8"), media_type="application/x-ndjson")

    # -- upkeep ----------------------------------------------------------------------------------------
    @r.post("/namespaces/{ns}/import", name="import")
    async def import_(who: Who, ns: NS, request: Request, distill: Annotated[bool, Query()] = True) -> Response:
        from starlette.concurrency import run_in_threadpool

        await run_in_threadpool(allow, who, ns, "write")
        raw = await request.body()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return JSONResponse({"error": "the export must be UTF-8 JSON Lines", "code": "export_format"}, 422)
        report = await run_in_threadpool(store.import_, ns, who, io.StringIO(text), distill=distill)
        note(request, nodes=report.node_total, relationships=report.relationship_total)
        return record_response(report)

    @r.post("/namespaces/{ns}/distill", name="distill")
    def distill(who: Who, ns: NS, body: Annotated[DistillBody, Body()] = DistillBody()) -> Response:  # noqa: B008 - FastAPI's way to default a body
        allow(who, ns, "write")
        return record_response(store.graph(ns).distill(body.family))

    @r.post("/namespaces/{ns}/prune", name="prune")
    def prune(who: Who, ns: NS, request: Request, body: PruneBody) -> Response:
        allow(who, ns, "admin")
        report = store.graph(ns).prune(
            ids(body.run_ids, "run id"),
            older_than_days=body.older_than_days,
            everything=body.everything,
            dry_run=body.dry_run,
        )
        note(request, runs=report.runs, everything=body.everything, dry_run=body.dry_run)
        return record_response(report)

    return r


def mount(app: FastAPI, registry: Registry, store: MemoryStore, metrics: Any) -> None:
    app.include_router(build_router(registry, store, metrics))
