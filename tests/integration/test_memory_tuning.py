"""Tuning records on a real Neo4j: what the cost model trains on, ranked and bounded."""

import pytest

from kope.memory import ExperienceGraph, TuningQuery, synthetic
from kope.memory.remote import RemoteMemory
from kope.memory.shapes import CaseShape, ShapeSummary
from kope.memory.specs import RunSpec
from tests.support.memory_server import memory_server

HW_A = synthetic.hardware("cpu-aaaa", "x86_64-avx512", "intel")
HW_B = synthetic.hardware("cpu-bbbb", "x86_64-avx512", "intel")
HW_C = synthetic.hardware("arm-cccc", "aarch64-neon", "arm")


@pytest.fixture
def memory(graph_client):
    return ExperienceGraph(graph_client, namespace="tune")


def run(memory, run_id, operator, speeds, hw=HW_A, template="row_norm", cases=4, status="correct"):
    spec = synthetic.run_spec(operator, run_id=run_id, hw=hw, cases=cases)
    memory.start_run(spec)
    memory.record_attempts(
        [
            synthetic.attempt(
                run_id,
                step,
                operator,
                speedup=speed,
                hw=hw,
                cases=cases,
                status=status,
                params={"template": template, "settings": {"lanes": 16 * (step + 1)}} if template else None,
            )
            for step, speed in enumerate(speeds)
        ]
    )


def query(run_id="mine", operator="rms_norm", hw=HW_A, **kw):
    summary = ShapeSummary.of(CaseShape("default", (1024 * (i + 1),)) for i in range(4))
    return TuningQuery(
        template="row_norm",
        run_id=run_id,
        operator=operator,
        hardware_id=hw["id"],
        hardware_class=hw["class"],
        vendor=hw["vendor"],
        shape_sig=summary.signature,
        shape_class=summary.shape_class,
        **kw,
    )


def test_records_carry_settings_per_case_shapes_and_speedups_and_the_hardware(memory):
    run(memory, "mine", "rms_norm", [1.0, 1.5])
    data = memory.tuning_records(query())
    assert [r.id for r in data.records] == ["mine:s1", "mine:s0"]
    first = data.records[0]
    assert first.settings == {"lanes": 32} and first.own and first.correct and first.a == 1.5
    assert [(c.name, c.shape, c.speedup) for c in first.cases][:2] == [
        ("case0", "default:1024", 1.5),
        ("case1", "default:2048", 1.5),
    ]
    assert first.hardware_tier == "hardware" and data.hardware["cpu-aaaa"].hw_class == "x86_64-avx512"
    assert data.hardware["cpu-aaaa"].cores == 2


def test_the_sample_ranks_this_run_then_the_operator_then_hardware_then_shapes(memory):
    run(memory, "other-op", "layer_norm", [3.0])
    run(memory, "same-op-arm", "rms_norm", [3.0], hw=HW_C)
    run(memory, "same-op-class", "rms_norm", [3.0], hw=HW_B)
    run(memory, "same-op-here-small", "rms_norm", [3.0], cases=2)
    run(memory, "same-op-here", "rms_norm", [3.0])
    run(memory, "mine", "rms_norm", [1.0])
    ids = [r.id for r in memory.tuning_records(query()).records]
    assert ids == [
        "mine:s0",
        "same-op-here:s0",
        "same-op-here-small:s0",
        "same-op-class:s0",
        "same-op-arm:s0",
        "other-op:s0",
    ]


def test_without_memory_only_the_runs_own_attempts_come_back(memory):
    run(memory, "earlier", "rms_norm", [2.0, 3.0])
    run(memory, "mine", "rms_norm", [1.0])
    data = memory.tuning_records(query(run_only=True))
    assert [r.id for r in data.records] == ["mine:s0"]


def test_only_the_templates_attempts_and_at_most_the_limit_come_back(memory):
    run(memory, "other-template", "rms_norm", [2.0], template="channel_norm")
    run(memory, "no-template", "rms_norm", [2.0], template=None)
    run(memory, "mine", "rms_norm", [1.0, 1.1, 1.2, 1.3])
    assert [r.id for r in memory.tuning_records(query(limit=2)).records] == ["mine:s3", "mine:s2"]
    assert {r.run_id for r in memory.tuning_records(query()).records} == {"mine"}


def test_failures_are_records_too(memory):
    run(memory, "mine", "rms_norm", [None], status="compile_error")
    (failed,) = memory.tuning_records(query()).records
    assert failed.status == "compile_error" and not failed.correct and failed.error_kind == "compile_error"


def test_decisions_and_tasks_keep_the_shapes_of_their_cases(memory, graph_client):
    spec = synthetic.run_spec("rms_norm", run_id="shaped", hw=HW_A)
    task = spec.task.model_copy(update={"shapes": {f"case{i}": f"default:{1024 * (i + 1)}" for i in range(4)}})
    memory.start_run(RunSpec.parse({**spec.model_dump(by_alias=True), "task": task}))
    memory.record_attempt(synthetic.attempt("shaped", 0, "rms_norm", hw=HW_A, params={"template": "row_norm"}))
    rows = graph_client.execute("memory/retrieve/candidates", ns="tune")
    assert rows  # the decision is there
    records, _, _ = graph_client._driver.execute_query(
        "MATCH (t:Task)<-[:FOR_TASK]-(:Run {id: 'shaped'})<-[:IN_RUN]-(d:Decision) "
        "RETURN t.case_shapes_json AS shapes, d.template AS template, d.shape_sig AS sig, d.shape_class AS cls",
        database_=graph_client.database,
    )
    row = records[0]
    assert '"case0": "default:1024"' in row["shapes"] and row["template"] == "row_norm"
    expected = ShapeSummary.of(CaseShape("default", (1024 * (i + 1),)) for i in range(4))
    assert row["sig"] == expected.signature and row["cls"] == expected.shape_class


def test_the_familys_other_templates_stand_in_when_memory_holds_nothing_of_the_template(memory):
    """Related templates: with no attempt of row_norm from another run, the family's other templates' attempts
    fill the sample (each naming its template), ranked like a template's own; never another family's."""
    run(memory, "cn-here", "batch_norm", [2.0], template="channel_norm")
    run(memory, "cn-arm", "batch_norm", [3.0], template="channel_norm", hw=HW_C)
    run(memory, "softmax", "softmax", [2.0], template="row_softmax")
    run_other_family(memory)  # row_softmax's attempt of another family: never read
    run(memory, "mine", "rms_norm", [1.0])
    data = memory.tuning_records(query(family="normalization"))
    assert [(r.id, r.template) for r in data.records] == [
        ("mine:s0", None),
        ("softmax:s0", "row_softmax"),
        ("cn-here:s0", "channel_norm"),
        ("cn-arm:s0", "channel_norm"),
    ]
    assert data.records[2].settings == {"lanes": 16} and not data.records[2].own
    # without the family, or with --no-memory, the sample is the template's alone
    assert [r.id for r in memory.tuning_records(query()).records] == ["mine:s0"]
    assert [r.id for r in memory.tuning_records(query(family="normalization", run_only=True)).records] == ["mine:s0"]


def test_related_templates_are_not_read_once_memory_holds_the_template_from_another_run(memory):
    run(memory, "cn", "batch_norm", [2.0], template="channel_norm")
    run(memory, "earlier", "layer_norm", [3.0])
    run(memory, "mine", "rms_norm", [1.0])
    records = memory.tuning_records(query(family="normalization")).records
    assert [(r.id, r.template) for r in records] == [("mine:s0", None), ("earlier:s0", None)]


def test_related_templates_fill_only_the_room_the_limit_leaves(memory):
    run(memory, "cn", "batch_norm", [2.0, 2.1, 2.2], template="channel_norm")
    run(memory, "mine", "rms_norm", [1.0])
    records = memory.tuning_records(query(family="normalization", limit=3)).records
    assert [r.id for r in records] == ["mine:s0", "cn:s2", "cn:s1"]


def run_other_family(memory):
    spec = synthetic.run_spec("relu", run_id="ew-family", hw=HW_A, family="elementwise")
    memory.start_run(spec)
    memory.record_attempt(
        synthetic.attempt(
            "ew-family",
            0,
            "relu",
            speedup=4.0,
            hw=HW_A,
            cases=4,
            family="elementwise",
            params={"template": "row_softmax", "settings": {"lanes": 16}},
        )
    )


def test_a_memory_server_answers_the_family_and_names_each_records_template(neo4j_server, tmp_path):
    server = memory_server(neo4j_server, tmp_path)
    try:
        token = server.key("team-tune", "read,write")
        with RemoteMemory(server.url, token, journal_root=tmp_path / "client" / "memory") as remote:
            run(remote, "cn", "batch_norm", [2.0], template="channel_norm")
            run(remote, "mine", "rms_norm", [1.0])
            records = remote.tuning_records(query(family="normalization")).records
            assert [(r.id, r.template, dict(r.settings)) for r in records] == [
                ("mine:s0", None, {"lanes": 16}),
                ("cn:s0", "channel_norm", {"lanes": 16}),
            ]
            assert [r.id for r in remote.tuning_records(query()).records] == ["mine:s0"]
    finally:
        server.stop()
