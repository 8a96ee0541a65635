"""Load through the memory server: 8 concurrent client processes of 2 teams recording at once.

Each client has its own key and run and records batches (journal first) for
KOPE_SERVER_LOAD_SECONDS seconds (default 8 here; `benchmarks/bench_server.py` runs the full
60 s), every attempt starting from a shared seed decision of its team or from one of its own,
so the four clients of a team grow the same lineages at the same time. Afterwards: every
acknowledged attempt is stored exactly once, in its team's namespace, stamped with its team
and key, and every stored d(v) equals a recomputation from scratch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from kope.memory import synthetic
from kope.memory.remote import RemoteMemory
from kope.memory.scoring import recompute_all
from tests.support.memory_server import memory_server

pytestmark = pytest.mark.slow
DURATION = float(os.environ.get("KOPE_SERVER_LOAD_SECONDS", "8"))
TEAMS = ("load-a", "load-b")
CLIENTS_PER_TEAM = 4
OP = "softmax"


def seed(server, team, token):
    with RemoteMemory(server.url, token) as memory:
        memory.start_run(synthetic.run_spec(OP, run_id=f"seed-{team}"))
        memory.record_attempts(
            [
                synthetic.attempt(f"seed-{team}", 0, OP, speedup=1.0),
                synthetic.attempt(f"seed-{team}", 1, OP, parent=f"seed-{team}:s0", speedup=1.2),
                synthetic.attempt(f"seed-{team}", 2, OP, parent=f"seed-{team}:s0", speedup=0.9),
            ]
        )
    return [f"seed-{team}:s{i}" for i in range(3)]


def test_eight_clients_of_two_teams_store_every_attempt_once_in_their_namespace_with_exact_scores(
    neo4j_server, graph_client, tmp_path
):
    # slow requests are logged (with their time in Neo4j) and the log goes with a failure
    server = memory_server(neo4j_server, tmp_path, "--rate-limit", "1000000/minute", "--slow-request-s", "5")
    try:
        seeds = {team: seed(server, team, server.key(team)) for team in TEAMS}
        clients = []
        for i in range(CLIENTS_PER_TEAM * len(TEAMS)):
            team = TEAMS[i % len(TEAMS)]
            token = server.key(team)
            settings = {
                "url": server.url,
                "token": token,
                "run_id": f"load-{i}",
                "operator": OP,
                "seeds": seeds[team],
                "duration": DURATION,
                "batch": 10,
                "seed": i,
                "journal": str(tmp_path / f"journal-{i}"),
            }
            proc = subprocess.Popen(
                [sys.executable, "-m", "kope.server.loadgen", json.dumps(settings)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            clients.append((team, token.split("_")[1], proc))
        acknowledged: dict[str, dict[str, str]] = {team: {} for team in TEAMS}  # id -> key id
        for team, key_id, proc in clients:
            out, err = proc.communicate(timeout=DURATION + 300)
            assert proc.returncode == 0, f"{err[-3000:]}\nthe server's log:\n{server.log()[-6000:]}"
            lines = [json.loads(line) for line in out.splitlines()]
            assert "done" in lines[-1]
            for line in lines[:-1]:
                for decision in line["acknowledged"]:
                    acknowledged[team][decision] = key_id
    finally:
        server.stop()

    total = sum(len(ids) for ids in acknowledged.values())
    assert total >= 8 * 10, f"only {total} attempts recorded in {DURATION} s"
    for team in TEAMS:
        rows = graph_client._driver.execute_query(
            "MATCH (d:Decision {ns: $ns}) RETURN d.id AS id, d.team AS team, d.key_id AS key, d.r AS r, "
            "d.parent_id AS parent, d.d AS d, count(*) AS n",
            {"ns": team},
        ).records
        stored = {r["id"]: r for r in rows}
        assert all(r["n"] == 1 for r in rows)
        assert set(stored) == set(acknowledged[team]) | set(seeds[team])  # all of its own, nothing else
        assert all(stored[i]["team"] == team and stored[i]["key"] == k for i, k in acknowledged[team].items())
        uids = graph_client._driver.execute_query(
            "MATCH (d:Decision) WHERE d.uid IN $uids RETURN count(d) AS n",
            {"uids": [f"{team}/{i}" for i in stored]},
        ).records[0]["n"]
        assert uids == len(stored)
        expected = recompute_all({i: (r["r"], r["parent"]) for i, r in stored.items()})
        assert {i: r["d"] for i, r in stored.items()} == pytest.approx(expected, rel=1e-12, abs=1e-12)
