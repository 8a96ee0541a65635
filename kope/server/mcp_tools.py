"""MCP tools over streamable HTTP at ``/mcp`` (the official ``mcp`` SDK), with the REST API's keys.

Any MCP-capable coding agent can use KOPE's memory while it optimizes a kernel: find what
worked and failed before (``retrieve_experience``), record its own attempts
(``start_run``, ``record_attempt``, ``finish_run``), follow a lineage, read a kernel.
The guard in front of the app has authenticated the key already; each tool reads the
identity from the HTTP request and goes through the same ACL and store as REST, so the
namespace and team of every write are decided by the server here too. The server is
stateless (every POST stands alone, JSON responses), so it needs no session affinity.

Kernels returned by ``get_kernel`` are untrusted code from another agent: evaluate them
only through the KOPE harness (``kope eval``), never by importing them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings

from kope.errors import KopeError
from kope.memory import wire
from kope.memory.retrieval import RetrievalQuery
from kope.memory.specs import Attempt, RunSpec, TaskSpec
from kope.memory.state import RunState
from kope.server import acl
from kope.server.auth import Identity
from kope.server.errors import status_of
from kope.server.registry import Registry
from kope.server.store import MemoryStore
from kope.teamweights import check_team_weights

INSTRUCTIONS = (
    "KOPE's shared Experience Graph of kernel optimization attempts. Before proposing a kernel, call "
    "retrieve_experience for the operator and hardware: it returns ranked lineages (what was tried, how it "
    "turned out: label effective/partial/ineffective/negative, speedup a, step ratio r, downstream score d) and "
    "validity rules (repeated failures). Record every attempt you evaluate (start_run once, then record_attempt "
    "per candidate with the harness's kope.outcome/1 record). Kernels from memory are untrusted: evaluate them "
    "only through the KOPE harness."
)


def _call(ctx: Context, action: str, namespace: str | None) -> tuple[Identity, str]:
    request = ctx.request_context.request
    who: Identity = request.scope["kope.identity"]  # type: ignore[union-attr]  # the SDK types request as optional; over HTTP it is set
    ns = namespace or who.home
    request.scope["kope.audit"] = {"action": f"mcp:{action}", "namespace": ns}  # type: ignore[union-attr]  # as above
    return who, ns


def _refused(ctx: Context, status: int, message: str) -> ToolError:
    """A refused tool call: MCP answers it in a 200 response, so the audit row gets the status it stands for."""
    request = ctx.request_context.request
    request.scope.setdefault("kope.audit", {})["status"] = status  # type: ignore[union-attr]  # set over HTTP
    return ToolError(message)


async def _run(ctx: Context, fn: Callable[[], Any]) -> Any:
    try:
        return await anyio.to_thread.run_sync(fn)
    except KopeError as exc:
        status, _code = status_of(exc)
        raise _refused(ctx, status, exc.message + (f" (hint: {exc.hint})" if exc.hint else "")) from None


def build_mcp(registry: Registry, store: MemoryStore, metrics: Any) -> FastMCP:
    mcp = FastMCP(
        "kope-memory",
        instructions=INSTRUCTIONS,
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        log_level="WARNING",  # FastMCP configures the root logger; the server's own settings decide
        # Requests need a bearer key (a browser tricked by DNS rebinding cannot send one),
        # and the server binds where its operator says: the Host check would only refuse real names.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    def allowed(who: Identity, ns: str, action: str) -> Callable[[Callable[[], Any]], Callable[[], Any]]:
        def wrap(fn: Callable[[], Any]) -> Callable[[], Any]:
            @functools.wraps(fn)
            def inner() -> Any:
                acl.authorize(registry, who, ns, action, store.holds_data)
                return fn()

            return inner

        return wrap

    @mcp.tool()
    async def whoami(ctx: Context) -> dict[str, Any]:
        """Your team, key scopes, home namespace and the namespaces you may read."""
        who, _ns = _call(ctx, "whoami", None)
        readable = await _run(ctx, lambda: acl.readable(registry, who))
        return {
            "team": who.team,
            "key_id": who.key_id,
            "scopes": list(who.scopes),
            "home": who.home,
            "readable": [n.to_dict() for n in readable],
        }

    @mcp.tool()
    async def retrieve_experience(
        ctx: Context,
        operator: str,
        family: str | None = None,
        target: str | None = None,
        hardware_id: str | None = None,
        hardware_class: str | None = None,
        vendor: str | None = None,
        layer: str | None = None,
        error_kind: str | None = None,
        k: int = 8,
        namespace: str | None = None,
        team_weights: dict[str, float] | None = None,
    ) -> dict[str, Any]:
        """Ranked experience for a kernel task: lineages (ancestor chains and sibling branches of the most
        relevant attempts: same operator > family > other, same hardware first) and the validity rules
        that apply. The same retrieval KOPE's own loop uses. ``team_weights``: how much each source team's
        attempts count (team -> 0..1, "*" for the rest; 0 leaves a team out; your own team counts 1)."""
        who, ns = _call(ctx, "retrieve_experience", namespace)
        if not 1 <= k <= 100:
            raise _refused(ctx, 422, "k must be between 1 and 100")
        try:
            weights = check_team_weights(team_weights or {})
        except ValueError as exc:
            raise _refused(ctx, 422, f"team_weights: {exc}") from None
        query = RetrievalQuery(
            operator, family, target, hardware_id, hardware_class, vendor, layer, error_kind, team_weights=weights
        )
        result = await _run(ctx, allowed(who, ns, "read")(lambda: store.graph(ns, who.team).retrieve(query, k)))
        return wire.dump(result)

    @mcp.tool()
    async def start_run(
        ctx: Context,
        operator: str,
        target: str,
        hardware: dict[str, Any],
        family: str = "unknown",
        level: int | None = None,
        cases: list[str] | None = None,
        proposer: str = "mcp-agent",
        model: str | None = None,
        run_id: str | None = None,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """Start a run (one optimization session of one task on one machine) before recording attempts.
        ``hardware`` is the harness's fingerprint (id, class, vendor, ...). Returns the run id."""
        who, ns = _call(ctx, "start_run", namespace)

        def work() -> Any:
            spec_data: dict[str, Any] = {
                "task": TaskSpec.parse(
                    {"operator": operator, "target": target, "family": family, "level": level, "cases": cases or []}
                ),
                "hardware": hardware,
                "proposer": proposer,
                "model": model,
            }
            if run_id is not None:
                spec_data["run_id"] = run_id
            spec = RunSpec.parse(spec_data)
            return store.start_runs(ns, who, [spec], None)[0]

        return wire.dump(await _run(ctx, allowed(who, ns, "write")(work)))

    @mcp.tool()
    async def record_attempt(
        ctx: Context,
        run_id: str,
        step: int,
        title: str,
        outcome: dict[str, Any],
        layer: str = "other",
        code: str | None = None,
        parent_id: str | None = None,
        thought: str = "",
        params: dict[str, Any] | None = None,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """Record one evaluated attempt: the decision (title, optimization layer, the state it started from,
        the kernel code) and the harness's outcome record (kope.outcome/1). The server computes the speedup,
        step ratio, label and downstream score; a failed or cheat_detected outcome is never positive evidence."""
        who, ns = _call(ctx, "record_attempt", namespace)

        def work() -> Any:
            attempt = Attempt.parse(
                {
                    "run_id": run_id,
                    "step": step,
                    "title": title,
                    "layer": layer,
                    "thought": thought,
                    "parent_id": parent_id,
                    "code": code,
                    "outcome": outcome,
                    "params": params,
                }
            )
            result = store.record_attempts(ns, who, [attempt], None)[0]
            metrics.attempts.inc(int(result.created))
            return result

        return wire.dump(await _run(ctx, allowed(who, ns, "write")(work)))

    @mcp.tool()
    async def finish_run(
        ctx: Context, run_id: str, status: str = "finished", namespace: str | None = None
    ) -> dict[str, Any]:
        """End a run (finished, interrupted, failed, budget_exhausted, target_reached) and distil insights."""
        import time

        from kope.memory.journaling import RUN_STATUSES

        who, ns = _call(ctx, "finish_run", namespace)
        if status not in RUN_STATUSES:
            raise _refused(ctx, 422, f"status must be one of {', '.join(RUN_STATUSES)}")
        run, _family = await _run(
            ctx, allowed(who, ns, "write")(lambda: store.finish_run(ns, run_id, status, time.time(), distill=True))
        )
        return wire.dump(run)

    @mcp.tool()
    async def get_lineage(
        ctx: Context, decision_id: str, limit: int = 200, namespace: str | None = None
    ) -> dict[str, Any]:
        """The lineage tree a decision belongs to: from its root, every branch, with status, a, r, label, d."""
        who, ns = _call(ctx, "get_lineage", namespace)
        if not 1 <= limit <= 10_000:
            raise _refused(ctx, 422, "limit must be between 1 and 10000")
        return wire.dump(await _run(ctx, allowed(who, ns, "read")(lambda: store.graph(ns).lineage(decision_id, limit))))

    @mcp.tool()
    async def get_run_state(ctx: Context, run_id: str, namespace: str | None = None) -> dict[str, Any]:
        """A run and its attempts in step order (incumbent, scores), e.g. to continue it."""
        who, ns = _call(ctx, "get_run_state", namespace)
        state = await _run(ctx, allowed(who, ns, "read")(lambda: store.graph(ns).run_state(run_id)))
        return wire.dump(state, RunState)

    @mcp.tool()
    async def get_kernel(ctx: Context, decision_id: str, namespace: str | None = None) -> dict[str, Any]:
        """The kernel source an attempt wrote. Untrusted code: evaluate it only through the KOPE harness."""
        who, ns = _call(ctx, "get_kernel", namespace)
        source = await _run(ctx, allowed(who, ns, "read")(lambda: store.graph(ns).kernel_source(decision_id)))
        return {"decision_id": decision_id, "source": source, "trust": "untrusted: evaluate only through the harness"}

    @mcp.tool()
    async def memory_stats(ctx: Context, namespace: str | None = None) -> dict[str, Any]:
        """What a namespace holds: nodes, relationships, outcomes by status and label, operators, teams."""
        who, ns = _call(ctx, "memory_stats", namespace)
        return wire.dump(await _run(ctx, allowed(who, ns, "read")(lambda: store.graph(ns).stats())))

    return mcp
