"""The as-deployed figures of a run's best kernel on their way into the memory (#33 item 7): the record, how it
merges into the stored cases, how a reader sees it, and what a bench's final evaluation may store."""

from __future__ import annotations

import json

import pytest

from kope.bench.final import deployed_figures
from kope.memory import DeployedFigures
from kope.memory.deployed import merged_cases
from kope.memory.errors import InvalidRecordError
from kope.memory.present import case_columns, decision_caption
from kope.memory.records import StoredCase

CASES = json.dumps(
    [
        {"name": "a", "passed": True, "speedup": 2.0},
        {"name": "b", "passed": True, "speedup": 1.5, "deployed_speedup": 9.9},
        {"name": "c", "passed": False, "speedup": None},
    ]
)


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"run_id": "r", "decision_id": "r:s1", "speedup": 0}, "speedup"),
        ({"run_id": "r", "decision_id": "r:s1", "cases": {"a": -1.0}}, "cases"),
        ({"run_id": "r", "decision_id": "r:s1", "error": "x" * 2001}, "error"),
        ({"run_id": "r", "decision_id": "bad id!"}, "decision_id"),
        ({"run_id": "r", "decision_id": "r:s1", "team": "other"}, "team"),
    ],
)
def test_a_bad_measurement_is_one_invalid_record_error_naming_the_field(data, where):
    with pytest.raises(InvalidRecordError, match=where):
        DeployedFigures.parse(data)


def test_each_named_case_gets_its_figure_and_an_earlier_one_is_replaced():
    figures = DeployedFigures(run_id="r", decision_id="r:s1", speedup=0.5, cases={"a": 0.5, "c": None})
    cases = json.loads(merged_cases(CASES, figures) or "")
    assert [c.get("deployed_speedup", "absent") for c in cases] == [0.5, "absent", None]
    assert [c["speedup"] for c in cases] == [2.0, 1.5, None]  # the harness's figures are untouched
    assert [StoredCase.from_json(c).deployed_speedup for c in cases] == [0.5, None, None]
    assert merged_cases(None, figures) is None


def test_readers_see_the_as_deployed_figure_beside_the_harness_figure():
    assert decision_caption(3, "unroll", None, "correct", 2.36, mark="↑1.69", deployed=0.93) == (
        "2.36× ↑1.69 · deployed 0.93× · s3 unroll"
    )
    assert decision_caption(3, "unroll", None, "correct", 2.36, mark="↑1.69") == "2.36× ↑1.69 · s3 unroll"
    columns = case_columns([{"name": "a", "passed": True, "speedup": 2.0, "deployed_speedup": 0.5},
                            {"name": "b", "passed": True, "speedup": 1.5, "deployed_speedup": None},
                            {"name": "c", "passed": True, "speedup": 1.1}])  # fmt: skip
    assert columns["case_speedups"] == ["2.00× · deployed 0.50×", "1.50× · deployed -", "1.10×"]


def final_block(cases: list[dict], deployed_error: str | None = None, deployed: bool = True) -> dict:
    return {
        "settings": {"deployed": deployed},
        "decision_id": "run-1:s2",
        "outcome": {"cases": cases, "deployed_error": deployed_error},
    }


def test_a_bench_stores_the_visible_cases_as_deployed_figures_and_nothing_of_the_held_out_ones():
    cases = [
        {"name": "v1", "passed": True, "speedup": 2.0, "deployed_speedup": 0.5},
        {"name": "v2", "passed": True, "speedup": 2.0, "deployed_speedup": 2.0},
        {"name": "h1", "heldout": True, "passed": True, "speedup": 3.0, "deployed_speedup": 0.1},
    ]
    figures = deployed_figures(final_block(cases, "incorrect: case h1 (n=77) differs"), "run-1")
    assert figures is not None and figures.decision_id == "run-1:s2" and figures.run_id == "run-1"
    assert figures.cases == {"v1": 0.5, "v2": 2.0} and figures.speedup == pytest.approx(1.0)
    assert figures.error is not None and "h1" not in figures.error and "77" not in figures.error
    assert deployed_figures(final_block(cases[:2]), "run-1").error is None  # type: ignore[union-attr]
    assert deployed_figures(final_block(cases, deployed=False), "run-1") is None
    assert deployed_figures(None, "run-1") is None
