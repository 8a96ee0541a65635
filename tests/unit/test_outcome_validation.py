"""KOPE validates the harness's own outcome type: one definition, a generated validator, a format-error constructor."""

import dataclasses

import pytest

from harness.record import Hardware, Outcome, Status
from kope.memory import parse_hardware, parse_outcome, synthetic
from kope.memory.errors import InvalidRecordError
from kope.memory.outcome import _model


def hardware() -> Hardware:
    return parse_hardware(synthetic.hardware())


def test_the_validator_has_exactly_the_records_fields_under_their_json_names():
    # with the as-deployed figures, which a record carries only once measured (a run's best kernel)
    record = dataclasses.replace(synthetic.outcome("softmax", "correct", 1.7), deployed_speedup=1.2)
    for cls, data in ((Outcome, record.to_dict()), (Hardware, record.hardware.to_dict())):
        model = _model(cls)
        json_names = {info.alias or name for name, info in model.model_fields.items()}
        assert json_names == set(data) == {f.name.rstrip("_") for f in dataclasses.fields(cls)}


def test_a_typed_record_comes_back_as_the_same_type_with_the_same_json():
    record = synthetic.outcome("softmax", "correct", 1.7)
    again = parse_outcome(record)
    assert type(again) is Outcome and again.to_dict() == record.to_dict()


def test_a_response_without_code_is_a_format_error_outcome():
    outcome = Outcome.format_error(
        "format_error:no_code",
        "the response holds no ```python code block",
        task="relu",
        family="elementwise",
        level=1,
        target="cpu",
        hardware=hardware(),
        cases=[("small", {"n": 8}), ("big", {"n": 4096})],
    )
    assert outcome.status is Status.FORMAT_ERROR and not outcome.ok and outcome.threads is None
    assert (outcome.cases_total, outcome.cases_passed, outcome.speedup, outcome.timings_valid) == (2, 0, None, False)
    assert [(c.name, c.params, c.passed, c.error) for c in outcome.cases] == [
        ("small", {"n": 8}, False, "the response holds no ```python code block"),
        ("big", {"n": 4096}, False, "the response holds no ```python code block"),
    ]
    assert parse_outcome(outcome.to_dict()).to_dict() == outcome.to_dict()
    assert outcome.violations() == []


def test_a_task_without_cases_still_counts_one():
    outcome = Outcome.format_error(
        "format_error:empty",
        "the response was empty",
        task="t",
        family="fused",
        level=None,
        target="cpu",
        hardware=hardware(),
    )
    assert outcome.cases_total == 1 and outcome.cases == []


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"error_excerpt": "x" * 2001}, "error_excerpt: at most 2000 characters"),
        ({"threads": -1}, "threads: must be >= 0"),
        ({"task": ""}, "task: must not be empty"),
    ],
)
def test_rules_below_the_types_are_checked_too(change, fragment):
    data = {**synthetic.outcome("softmax", "incorrect").to_dict(), **change}
    with pytest.raises(InvalidRecordError, match="invalid outcome record") as info:
        parse_outcome(data)
    assert fragment in str(info.value)


def test_bad_hardware_names_the_field():
    with pytest.raises(InvalidRecordError, match=r"invalid hardware: cores"):
        parse_hardware({**synthetic.hardware(), "cores": "many"})
