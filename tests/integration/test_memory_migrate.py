"""One word per number (issue 31) against a real Neo4j: an Outcome's `speedup` is the measured speedup, as in the
harness's record, and `speedup_usable` is the decision's a. A graph written the old way (the usable speedup in
`speedup`, the measured one in `speedup_measured`) is rewritten once by the migration (`kope memory migrate`, also
run by `kope memory init`) and then reads correctly with the new code; running it again changes nothing. Export
files of version 1 (the old names) are converted on import; a version 2 file with the old name is refused."""

import dataclasses
import io
import json

import pytest

from kope.memory import ExperienceGraph, Journal, synthetic
from kope.memory.errors import ExportFormatError

HW = synthetic.hardware("cpu-aaaa", "x86_64-avx2", "intel")

# What KOPE wrote before issue 31 (cypher/memory/attempt/create.cypher then: `o.speedup = d.a`, and the recorder's
# `speedup_measured`, left out when the harness measured nothing), made from what KOPE writes now.
OLD_SHAPE = (
    "MATCH (o:Outcome) WHERE o.ns = $ns "
    "SET o.speedup_measured = o.speedup, o.speedup = o.speedup_usable REMOVE o.speedup_usable"
)
# step -> (speedup, speedup_usable) as KOPE writes them now
EXPECTED = {0: (1.0, 1.0), 1: (1.5, 1.5), 2: (2.0, None), 3: (1.3, 0.0), 4: (None, 0.0)}
OLD = {0: (1.0, 1.0), 1: (1.5, 1.5), 2: (None, 2.0), 3: (0.0, 1.3), 4: (0.0, None)}  # (speedup, speedup_measured)


def rows(client, query, **params):
    """Ad-hoc reads and the old writer (test code, not KOPE's Cypher)."""
    return [dict(r) for r in client._driver.execute_query(query, params, database_=client.database).records]


def with_outcome(attempt, **change):
    return attempt.model_copy(update={"outcome": dataclasses.replace(attempt.outcome, **change)})


def record(graph):
    """A run whose outcomes cover every case: correct, correct without valid timings (a unknown), incorrect with a
    speedup measured on the cases that passed (a = 0), and a failure with nothing measured."""
    graph.start_run(synthetic.run_spec("softmax", run_id="r0", hw=HW))
    graph.record_attempts(
        [
            synthetic.attempt("r0", 0, "softmax", hw=HW, speedup=1.0),
            synthetic.attempt("r0", 1, "softmax", parent="r0:s0", hw=HW, speedup=1.5),
            with_outcome(
                synthetic.attempt("r0", 2, "softmax", parent="r0:s1", hw=HW, speedup=2.0), timings_valid=False
            ),
            with_outcome(synthetic.attempt("r0", 3, "softmax", parent="r0:s1", hw=HW, status="incorrect"), speedup=1.3),
            synthetic.attempt("r0", 4, "softmax", parent="r0:s1", hw=HW, status="compile_error"),
        ]
    )
    graph.finish_run("r0")


def stored(client, ns):
    found = rows(
        client,
        "MATCH (d:Decision {ns: $ns})-[:PRODUCED]->(o:Outcome) "
        "RETURN d.step AS step, properties(o) AS props ORDER BY step",
        ns=ns,
    )
    return {r["step"]: r["props"] for r in found}


def speeds(client, ns, old=False):
    second = "speedup_measured" if old else "speedup_usable"
    return {step: (p.get("speedup"), p.get(second)) for step, p in stored(client, ns).items()}


def assert_reads_correctly(graph):
    for step, (speedup, usable) in EXPECTED.items():
        outcome = graph.outcome(f"r0:s{step}")
        assert (outcome.speedup, outcome.speedup_usable) == (speedup, usable), step
    state = graph.step_state("r0")
    assert {d: (o.speedup, o.speedup_usable) for d, o in state.outcomes.items()} == {
        f"r0:s{step}": value for step, value in EXPECTED.items()
    }
    assert state.run.best_speedup == 1.5 and state.run.incumbent_id == "r0:s1"


def test_kope_writes_the_measured_speedup_as_speedup_and_a_as_speedup_usable(graph_client):
    graph = ExperienceGraph(graph_client, namespace="new")
    record(graph)
    assert speeds(graph_client, "new") == EXPECTED
    assert all("speedup_measured" not in p for p in stored(graph_client, "new").values())
    assert graph.migrate() == {"outcome_speedup": 0}  # written now: nothing to migrate
    assert_reads_correctly(graph)


def test_a_graph_written_the_old_way_is_migrated_once_and_reads_correctly(graph_client):
    graph, other = ExperienceGraph(graph_client, namespace="old"), ExperienceGraph(graph_client, namespace="other")
    record(graph)
    record(other)
    for ns in ("old", "other"):
        rows(graph_client, OLD_SHAPE, ns=ns)
        assert speeds(graph_client, ns, old=True) == OLD
    assert graph.migrate() == {"outcome_speedup": 5}
    assert speeds(graph_client, "old") == EXPECTED
    assert all("speedup_measured" not in p for p in stored(graph_client, "old").values())
    assert_reads_correctly(graph)
    before = stored(graph_client, "old")
    assert graph.migrate() == {"outcome_speedup": 0}
    assert stored(graph_client, "old") == before  # a second run changes nothing
    assert speeds(graph_client, "other", old=True) == OLD  # one namespace at a time
    assert other.migrate() == {"outcome_speedup": 5}
    assert_reads_correctly(other)


def test_kope_memory_migrate_and_init_report_what_they_changed(graph_client, neo4j_server, kope_cli, tmp_path):
    record(ExperienceGraph(graph_client, namespace="cli"))
    rows(graph_client, OLD_SHAPE, ns="cli")
    env = neo4j_server.env(KOPE_DATA_DIR=str(tmp_path / "data"), NO_COLOR="1", COLUMNS="200")
    first = kope_cli("memory", "migrate", "--namespace", "cli", env=env, check=True).stdout
    assert "namespace cli: migration outcome_speedup: 5 nodes rewritten" in first
    again = json.loads(kope_cli("memory", "migrate", "--namespace", "cli", "--json", env=env, check=True).stdout)
    assert again == {"namespace": "cli", "changed": {"outcome_speedup": 0}}
    assert speeds(graph_client, "cli") == EXPECTED
    rows(graph_client, OLD_SHAPE, ns="cli")
    init = kope_cli("memory", "init", "--namespace", "cli", env=env, check=True).stdout
    assert "migration outcome_speedup: 5 nodes rewritten" in init
    assert speeds(graph_client, "cli") == EXPECTED


def export_text(graph):
    buffer = io.StringIO()
    graph.export_to(buffer)
    return buffer.getvalue()


def as_version_1(text):
    """An export as KOPE wrote it before issue 31: version 1, the old Outcome names."""
    lines = text.splitlines()
    header = json.loads(lines[0])
    out = [json.dumps({**header, "version": 1})]
    for line in lines[1:]:
        obj = json.loads(line)
        if obj.get("node") == "Outcome":
            props = dict(obj["props"])
            measured, usable = props.pop("speedup", None), props.pop("speedup_usable", None)
            props |= {"speedup_measured": measured} if measured is not None else {}
            props |= {"speedup": usable} if usable is not None else {}
            obj["props"] = props
        out.append(json.dumps(obj))
    return "\n".join(out) + "\n"


def test_a_version_1_export_is_converted_on_import(graph_client, tmp_path):
    source = ExperienceGraph(graph_client, namespace="src")
    record(source)
    text = export_text(source)
    assert json.loads(text.splitlines()[0])["version"] == 2
    old = as_version_1(text)
    assert '"speedup_measured"' in old
    target = ExperienceGraph(graph_client, namespace="dst", journal=Journal(tmp_path / "memory", "dst"))
    target.import_from(io.StringIO(old))
    assert speeds(graph_client, "dst") == EXPECTED
    assert_reads_correctly(target)


def test_a_version_2_export_with_the_old_name_is_refused_before_anything_is_written(graph_client):
    source = ExperienceGraph(graph_client, namespace="src")
    record(source)
    mixed = as_version_1(export_text(source)).replace('"version": 1', '"version": 2', 1)
    target = ExperienceGraph(graph_client, namespace="dst")
    with pytest.raises(ExportFormatError, match="speedup_measured, the version 1 name, in a version 2 file"):
        target.import_from(io.StringIO(mixed))
    assert rows(graph_client, "MATCH (n {ns: 'dst'}) RETURN count(n) AS n")[0]["n"] == 0


def test_the_memory_server_converts_a_version_1_upload_and_derives_speedup_usable(graph_client):
    from kope.server.auth import Identity
    from kope.server.store import import_export

    source = ExperienceGraph(graph_client, namespace="src")
    record(source)
    old = as_version_1(export_text(source))
    # a claim the server must not take from the file: the usable speedup is the a it computes
    old = old.replace('"speedup": 1.5', '"speedup": 99.0', 1)
    who = Identity(key_id="k1", team="team-b", scopes=("write",), home="team-b")
    import_export(graph_client, "shared", who, io.StringIO(old), "upload")
    assert speeds(graph_client, "shared") == EXPECTED
