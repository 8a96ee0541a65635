"""The memory server's trust boundary, end to end: a real `kope serve` (uvicorn) process on a free
127.0.0.1 port, the session's real Neo4j, two teams with different keys and scopes.

Team A owns namespace team-a, team B owns team-b. What B may and may not do with A's memory,
what bad keys, floods, oversized or malformed bodies and Cypher-shaped names get, and what the
audit log and the stamps on the graph say afterwards.
"""

from __future__ import annotations

import json
import subprocess
from urllib.parse import quote

import httpx
import pytest

from kope.memory import ExperienceGraph, synthetic
from kope.memory.remote import MemoryAccessError, RemoteMemory
from tests.support.memory_server import KOPE, memory_server

pytestmark = pytest.mark.slow
OP = "softmax"
RATE = 40  # requests per second per key on this module's server


@pytest.fixture(scope="module")
def server(neo4j_server, tmp_path_factory):
    srv = memory_server(
        neo4j_server, tmp_path_factory.mktemp("acl"), "--rate-limit", f"{RATE}/second", "--max-body-mb", "0.25"
    )
    yield srv
    srv.stop()


@pytest.fixture
def teams(server, graph_client):
    """Fresh keys for team-a (read, write, admin) and team-b (read, write, admin), team-a holding one run."""
    keys = {"a": server.key("team-a", "read,write,admin"), "b": server.key("team-b", "read,write,admin")}
    server.registry.set_sharing("team-a", "private")
    with RemoteMemory(server.url, keys["a"]) as a:
        a.start_run(synthetic.run_spec(OP, run_id="run-a"))
        a.record_attempt(synthetic.attempt("run-a", 0, OP, speedup=1.5))
    return keys


def call(server, token, method, path, **kwargs):
    headers = kwargs.pop("headers", {})
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.request(method, server.url + path, headers=headers, timeout=30, **kwargs)


def one_line_error(response, status, code=None):
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) <= {"error", "code", "hint"} and "\n" not in body["error"], body
    assert "Traceback" not in response.text and 'File "' not in response.text
    if code:
        assert body["code"] == code, body
    return body


def graph_shape(graph_client, ns):
    rows = graph_client._driver.execute_query(
        "MATCH (n {ns: $ns}) RETURN labels(n)[0] AS label, count(*) AS n ORDER BY label", {"ns": ns}
    ).records
    return {r["label"]: r["n"] for r in rows}


def attempt_body(run_id="run-a", step=1):
    return {"attempts": [synthetic.attempt(run_id, step, OP, parent=f"{run_id}:s0").to_json()]}


# -- scopes and namespaces --------------------------------------------------------------------------------


def test_team_b_cannot_write_runs_or_attempts_into_team_a_namespace(server, teams, graph_client):
    # 404 as for a missing namespace (issue 35): a refusal does not tell that team-a exists
    before = graph_shape(graph_client, "team-a")
    runs = {"runs": [synthetic.run_spec(OP, run_id="run-b").model_dump(mode="json", by_alias=True)]}
    one_line_error(call(server, teams["b"], "POST", "/v1/namespaces/team-a/runs", json=runs), 404, "unknown_namespace")
    one_line_error(call(server, teams["b"], "POST", "/v1/namespaces/team-a/attempts", json=attempt_body()), 404)
    one_line_error(call(server, teams["b"], "POST", "/v1/namespaces/team-a/runs/run-a/finish", json={}), 404)
    assert graph_shape(graph_client, "team-a") == before


def test_team_b_cannot_prune_or_import_into_team_a_namespace(server, teams, graph_client):
    before = graph_shape(graph_client, "team-a")
    body = {"everything": True}
    one_line_error(call(server, teams["b"], "POST", "/v1/namespaces/team-a/prune", json=body), 404, "unknown_namespace")
    with RemoteMemory(server.url, teams["b"]) as b:
        b.start_run(synthetic.run_spec(OP, run_id="run-b"))
        export = call(server, teams["b"], "GET", "/v1/namespaces/team-b/export").text
    response = call(
        server, teams["b"], "POST", "/v1/namespaces/team-a/import", content=export.encode(),
        headers={"Content-Type": "application/x-ndjson"},
    )  # fmt: skip
    one_line_error(response, 404, "unknown_namespace")
    assert graph_shape(graph_client, "team-a") == before


def test_an_unshared_namespace_is_not_readable_and_looks_like_a_missing_one(server, teams):
    paths = ("/stats", "/runs/run-a", "/runs/run-a/state", "/runs/run-a/step_state", "/decisions/run-a:s0/kernel")
    for path in (*paths, "/export"):
        denied = one_line_error(call(server, teams["b"], "GET", "/v1/namespaces/team-a" + path), 404)
        missing = one_line_error(call(server, teams["b"], "GET", "/v1/namespaces/no-such-ns" + path), 404)
        assert denied["code"] == missing["code"] == "unknown_namespace"
    query = {"query": {"operator": OP}, "k": 4}
    one_line_error(call(server, teams["b"], "POST", "/v1/namespaces/team-a/retrieve", json=query), 404)


def test_a_namespace_shared_with_team_b_is_readable_by_it_but_still_not_writable(server, teams, graph_client):
    server.registry.set_sharing("team-a", "shared", ["team-b"])
    with RemoteMemory(server.url, teams["b"], namespace="team-a") as b:
        found = b.retrieve(synthetic_query(), k=4)
        assert [lineage.hit.id for lineage in found.lineages] == ["run-a:s0"]
        assert b.run_state("run-a").decisions[0].a == 1.5
        with pytest.raises(MemoryAccessError, match="not team 'team-b'"):
            b.start_run(synthetic.run_spec(OP, run_id="run-b2"))
    assert graph_shape(graph_client, "team-a")["Run"] == 1


def test_a_reader_weights_the_teams_whose_evidence_it_reads(server, teams):
    # the attempt carries the team of the key that wrote it; the reader's weights travel with its query
    server.registry.set_sharing("team-a", "shared", ["team-b"])
    with RemoteMemory(server.url, teams["b"], namespace="team-a", team_weights={"team-a": 0.5}) as b:
        hit = b.retrieve(synthetic_query(), k=4).lineages[0]
        assert (hit.hit.id, hit.hit.team, hit.relevance.team_weight) == ("run-a:s0", "team-a", 0.5)
    with RemoteMemory(server.url, teams["b"], namespace="team-a", team_weights={"*": 0}) as b:
        assert b.retrieve(synthetic_query(), k=4).lineages == ()
    with RemoteMemory(server.url, teams["a"], team_weights={"*": 0}) as a:  # its own team weighs 1
        assert [lin.hit.id for lin in a.retrieve(synthetic_query(), k=4).lineages] == ["run-a:s0"]
    for bad in ([["team-a", 2]], [["no spaces", 0.5]], [["team-a"]]):
        query = {"query": {"operator": OP, "team_weights": bad}, "k": 4}
        one_line_error(call(server, teams["a"], "POST", "/v1/namespaces/team-a/retrieve", json=query), 422)


@pytest.mark.parametrize("history_code", [False, True])
def test_a_step_state_through_the_server_is_the_one_the_graph_reads(server, teams, graph_client, history_code):
    # RemoteMemory is the second implementation of the memory protocol: the same StepState, one request
    with RemoteMemory(server.url, teams["a"]) as a:
        remote = a.step_state("run-a", history_code=history_code)
    direct = ExperienceGraph(graph_client, namespace="team-a").step_state("run-a", history_code=history_code)
    assert remote == direct
    assert remote.attempt("run-a:s0").decision.a == 1.5 and remote.history_code is history_code


def test_a_key_without_write_scope_can_read_its_namespace_but_not_write(server, teams):
    reader = server.key("team-a", "read")
    response = call(server, reader, "GET", "/v1/namespaces/team-a/stats")
    assert response.status_code == 200 and response.json()["nodes"]["Decision"] == 1
    one_line_error(call(server, reader, "POST", "/v1/namespaces/team-a/attempts", json=attempt_body()), 403)
    writer = server.key("team-a", "read,write")
    one_line_error(call(server, writer, "POST", "/v1/namespaces/team-a/prune", json={"everything": True}), 403)


def synthetic_query():
    from kope.memory.retrieval import RetrievalQuery

    return RetrievalQuery(OP, "normalization", "cpu", "cpu-test0001", "x86_64-avx2", "intel")


# -- keys --------------------------------------------------------------------------------------------------


def test_missing_malformed_unknown_wrong_or_revoked_keys_get_401(server, teams):
    good = teams["a"]
    key_id = good.split("_")[1]
    wrong_secret = f"kope_{key_id}_{'x' * 43}"
    unknown = f"kope_{'0' * 16}_{good.split('_', 2)[2]}"
    revoked = server.key("team-a")
    assert call(server, revoked, "GET", "/v1/whoami").status_code == 200
    server.registry.revoke(revoked.split("_")[1])
    for token in (None, "", "not-a-key", "kope_123_abc", wrong_secret, unknown, revoked):
        headers = {"Authorization": f"Bearer {token}".strip()} if token is not None else {}
        response = call(server, None, "GET", "/v1/namespaces/team-a/stats", headers=headers)
        one_line_error(response, 401, "unauthorized")
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
    basic = call(server, None, "GET", "/v1/whoami", headers={"Authorization": "Basic " + good})
    one_line_error(basic, 401)
    assert call(server, good, "GET", "/v1/whoami").json()["team"] == "team-a"


def test_only_health_and_the_api_docs_answer_without_a_key(server):
    assert httpx.get(server.url + "/health").json()["status"] == "ok"
    assert httpx.get(server.url + "/openapi.json").json()["info"]["title"] == "KOPE memory server"
    assert httpx.get(server.url + "/docs").status_code == 200
    for method, path in (("GET", "/metrics"), ("GET", "/v1/whoami"), ("POST", "/mcp"), ("GET", "/v1/namespaces")):
        one_line_error(httpx.request(method, server.url + path), 401)


def test_a_flood_from_one_key_gets_429_with_retry_after_and_other_keys_are_served(server, teams):
    flooder = server.key("team-b", "read")
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {flooder}"}) as http:
        statuses = [http.get("/v1/whoami") for _ in range(RATE * 3)]
    limited = [r for r in statuses if r.status_code == 429]
    assert limited and all(r.status_code in (200, 429) for r in statuses)
    one_line_error(limited[0], 429, "rate_limited")
    assert int(limited[0].headers["Retry-After"]) >= 1
    assert call(server, teams["a"], "GET", "/v1/whoami").status_code == 200


# -- bodies ------------------------------------------------------------------------------------------------


def test_an_oversized_body_gets_413_declared_or_streamed(server, teams, graph_client):
    before = graph_shape(graph_client, "team-a")
    big = synthetic.attempt("run-a", 1, OP, parent="run-a:s0", code="x" * 300_000).to_json()
    one_line_error(
        call(server, teams["a"], "POST", "/v1/namespaces/team-a/attempts", json={"attempts": [big]}), 413, "too_large"
    )

    def chunks():
        payload = json.dumps({"attempts": [big]}).encode()
        for start in range(0, len(payload), 10_000):
            yield payload[start : start + 10_000]

    streamed = call(
        server, teams["a"], "POST", "/v1/namespaces/team-a/attempts", content=chunks(),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    one_line_error(streamed, 413, "too_large")
    assert graph_shape(graph_client, "team-a") == before


def test_malformed_bodies_get_422_with_one_clear_message(server, teams, graph_client):
    before = graph_shape(graph_client, "team-a")
    path = "/v1/namespaces/team-a/attempts"
    not_json = call(
        server, teams["a"], "POST", path, content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert "not valid JSON" in one_line_error(not_json, 422)["error"]
    no_outcome = attempt_body()
    del no_outcome["attempts"][0]["outcome"]
    assert "outcome" in one_line_error(call(server, teams["a"], "POST", path, json=no_outcome), 422)["error"]
    bad_status = attempt_body()
    bad_status["attempts"][0]["outcome"]["status"] = "amazing"
    assert "status" in one_line_error(call(server, teams["a"], "POST", path, json=bad_status), 422)["error"]
    # a client cannot claim a team or a namespace: the body has no such fields
    claims = dict(attempt_body(), team="team-b")
    assert "team" in one_line_error(call(server, teams["a"], "POST", path, json=claims), 422)["error"]
    one_line_error(call(server, teams["a"], "POST", path, json={"attempts": []}), 422)
    assert graph_shape(graph_client, "team-a") == before


def test_names_and_ids_shaped_as_cypher_injection_change_nothing(server, teams, graph_client):
    everything = graph_client.counts()
    nasty = ["x' OR 1=1 //", "a}) DETACH DELETE n //", "team-a/../team-b", "`n`", "*", "team-a' OR ''='"]
    for name in nasty:
        for method, suffix in (("GET", "/stats"), ("POST", "/prune")):
            path = f"/v1/namespaces/{quote(name, safe='')}{suffix}"  # sent as is, not normalised by the client
            response = call(server, teams["a"], method, path, json={"everything": True})
            assert response.status_code in (404, 422), (name, response.status_code, response.text)
        for run_id in (name, "run-a' OR '1'='1", "run-a})-[r]-() DELETE r //"):
            got = call(server, teams["a"], "GET", f"/v1/namespaces/team-a/runs/{quote(run_id, safe='')}/state")
            assert got.status_code in (404, 422), (run_id, got.text)
            one_line_error(got, got.status_code)
    prune = {"run_ids": ["run-a' OR 1=1 DETACH DELETE run //"]}
    one_line_error(call(server, teams["a"], "POST", "/v1/namespaces/team-a/prune", json=prune), 422)
    # text fields are data: stored verbatim, never executed
    title = "MATCH (n) DETACH DELETE n"
    body = {"attempts": [synthetic.attempt("run-a", 1, OP, parent="run-a:s0", title=title).to_json()]}
    assert call(server, teams["a"], "POST", "/v1/namespaces/team-a/attempts", json=body).status_code == 200
    after = graph_client.counts()
    assert after["nodes"] == everything["nodes"] + 3  # the new Decision, Outcome and Kernel
    stored = graph_client._driver.execute_query("MATCH (d:Decision {uid: 'team-a/run-a:s1'}) RETURN d.title AS t")
    assert stored.records[0]["t"] == title


# -- what the server writes ---------------------------------------------------------------------------------


def test_every_write_is_stamped_with_the_keys_team_and_id_never_the_clients_claim(server, teams, graph_client):
    key_id = teams["a"].split("_")[1]
    row = graph_client._driver.execute_query(
        "MATCH (d:Decision {uid: 'team-a/run-a:s0'})-[:IN_RUN]->(run:Run) "
        "RETURN d.team AS team, d.key_id AS key, d.harness_version AS hv, d.recorded_at AS at, "
        "run.team AS run_team, run.key_id AS run_key"
    ).records[0]
    assert (row["team"], row["key"], row["run_team"], row["run_key"]) == ("team-a", key_id, "team-a", key_id)
    assert row["hv"] and row["at"] > 0
    # a replay by another key of the same team changes no provenance
    other = server.key("team-a")
    replay = {"attempts": [synthetic.attempt("run-a", 0, OP, speedup=1.5).to_json()]}
    result = call(server, other, "POST", "/v1/namespaces/team-a/attempts", json=replay).json()
    assert result[0]["created"] is False
    again = graph_client._driver.execute_query("MATCH (d:Decision {uid: 'team-a/run-a:s0'}) RETURN d.key_id AS k")
    assert again.records[0]["k"] == key_id


def test_a_cheat_detected_outcome_is_never_positive_evidence(server, teams, graph_client):
    cheat = synthetic.attempt("run-a", 1, OP, parent="run-a:s0", status="cheat_detected").to_json()
    cheat["outcome"]["speedup"] = 80.0  # what the candidate claimed; the harness caught it
    with RemoteMemory(server.url, teams["a"]) as a:
        result = a.record_attempts([cheat])[0]
        assert (result.a, result.r, result.label) == (0.0, 0.0, "negative")
        assert result.incumbent_id == "run-a:s0"
        a.finish_run("run-a")
        found = a.retrieve(synthetic_query(), k=4)
    ranked = {lineage.hit.id: lineage.hit.label for lineage in found.lineages}
    assert ranked["run-a:s1"] == "negative" and [lin.hit.id for lin in found.lineages][0] == "run-a:s0"
    patterns = graph_client._driver.execute_query(
        "MATCH (i:Insight {ns: 'team-a', kind: 'pattern'})-[:DERIVED_FROM]->(o:Outcome {status: 'cheat_detected'}) "
        "RETURN count(i) AS n"
    )
    assert patterns.records[0]["n"] == 0


def test_the_audit_log_records_who_read_and_wrote_what_including_refusals(server, teams, tmp_path):
    call(server, teams["b"], "GET", "/v1/namespaces/team-a/stats")
    call(server, teams["b"], "POST", "/v1/namespaces/team-a/attempts", json=attempt_body())
    call(server, teams["a"], "GET", "/v1/namespaces/team-a/runs/run-a/state")
    import time

    time.sleep(0.6)  # the audit writer flushes every 0.2 s
    proc = subprocess.run(
        [str(KOPE), "serve", "--registry", str(server.registry_path), "audit", "--namespace", "team-a", "--json"],
        capture_output=True, text=True, env=server.env, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    seen = {(r["team"], r["action"], r["status"]) for r in rows}
    assert ("team-b", "stats", 404) in seen and ("team-b", "record_attempts", 404) in seen
    assert ("team-a", "run_state", 200) in seen and ("team-a", "record_attempts", 200) in seen
    written = next(r for r in rows if r["team"] == "team-a" and r["action"] == "record_attempts")
    assert written["detail"]["attempts"] == 1 and written["key_id"] == teams["a"].split("_")[1]
    assert teams["a"] not in proc.stdout and teams["a"] not in server.log()


def test_metrics_count_requests_by_route_and_status(server, teams):
    call(server, teams["a"], "GET", "/v1/namespaces/team-a/stats")
    text = call(server, teams["a"], "GET", "/metrics").text
    assert 'kope_server_requests_total{method="GET",route="/v1/namespaces/{ns}/stats",status="200"}' in text
    assert "kope_server_attempts_recorded_total" in text
