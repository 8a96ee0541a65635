"""MCP at /mcp: the official `mcp` client against a real `kope serve` process, with a team key."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from kope.memory import synthetic
from kope.memory.remote import RemoteMemory
from tests.support.memory_server import memory_server

pytestmark = pytest.mark.slow
OP = "softmax"
EXPECTED_TOOLS = {
    "whoami",
    "retrieve_experience",
    "start_run",
    "record_attempt",
    "finish_run",
    "get_lineage",
    "get_run_state",
    "get_kernel",
    "memory_stats",
}


async def session_calls(url: str, token: str, calls: list[tuple[str, dict]]) -> tuple[set[str], list]:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
        async with streamable_http_client(url + "/mcp", http_client=http) as (read, write, _):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = {tool.name for tool in (await session.list_tools()).tools}
                results = [await session.call_tool(name, args) for name, args in calls]
    return tools, results


def payload(result) -> dict:
    assert not result.isError, result.content
    return result.structuredContent or json.loads(result.content[0].text)


def test_the_mcp_client_lists_the_tools_and_retrieves_and_records_with_a_key(neo4j_server, graph_client, tmp_path):
    server = memory_server(neo4j_server, tmp_path)
    try:
        token = server.key("team-mcp", "read,write")
        with RemoteMemory(server.url, token) as memory:
            memory.start_run(synthetic.run_spec(OP, run_id="agent-run"))
            memory.record_attempt(synthetic.attempt("agent-run", 0, OP, speedup=1.4))
        outcome = synthetic.outcome(OP, "correct", 2.1).to_dict()
        calls = [
            ("retrieve_experience", {"operator": OP, "family": "normalization", "hardware_id": "cpu-test0001", "k": 4}),
            (
                "record_attempt",
                {
                    "run_id": "agent-run",
                    "step": 1,
                    "title": "vectorize the row loop",
                    "layer": "vectorization",
                    "parent_id": "agent-run:s0",
                    "code": "// kernel\n",
                    "outcome": outcome,
                },
            ),
            ("get_lineage", {"decision_id": "agent-run:s1"}),
            ("memory_stats", {}),
        ]
        tools, results = anyio.run(session_calls, server.url, token, calls)
        assert EXPECTED_TOOLS <= tools
        retrieved, recorded, lineage, stats = (payload(r) for r in results)
        assert [lin["hit"]["id"] for lin in retrieved["lineages"]] == ["agent-run:s0"]
        assert recorded["created"] and recorded["label"] == "effective" and recorded["incumbent_changed"]
        assert recorded["r"] == pytest.approx(2.1 / 1.4)
        assert lineage["root"]["children"][0]["id"] == "agent-run:s1"
        assert stats["namespace"] == "team-mcp" and stats["nodes"]["Decision"] == 2
        row = graph_client._driver.execute_query(
            "MATCH (d:Decision {uid: 'team-mcp/agent-run:s1'}) RETURN d.team AS team, d.key_id AS key"
        ).records[0]
        assert (row["team"], row["key"]) == ("team-mcp", token.split("_")[1])

        # another team's key cannot write into team-mcp through MCP either; no key: 401
        other = server.key("team-other", "read,write")
        _tools, (denied,) = anyio.run(session_calls, server.url, other, [("memory_stats", {"namespace": "team-mcp"})])
        assert denied.isError and "no namespace 'team-mcp'" in denied.content[0].text
        assert httpx.post(server.url + "/mcp", json={}).status_code == 401
    finally:
        server.stop()
