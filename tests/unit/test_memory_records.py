"""Outcome, attempt and graph records: validated on the way in, explicit on the way out."""

import json

import pytest

from kope.memory import synthetic
from kope.memory.errors import InvalidRecordError
from kope.memory.outcome import parse_outcome
from kope.memory.records import DecisionRecord, RecordShapeError
from kope.memory.specs import Attempt


def contract_dict():
    return synthetic.outcome("softmax", "correct", 1.7).to_dict()


def test_contract_dict_round_trips_with_its_exact_field_names():
    data = contract_dict()
    assert data["schema"] == "kope.outcome/1" and data["hardware"]["class"] == "x86_64-avx2"
    assert parse_outcome(json.dumps(data)).to_dict() == data


def test_a_typed_record_with_to_dict_is_accepted():
    class HarnessRecord:
        def to_dict(self):
            return contract_dict()

    assert parse_outcome(HarnessRecord()).speedup == 1.7


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"status": "great"}, "status"),
        ({"cases_passed": 9}, "cases_passed (9) exceeds cases_total"),
        ({"speedup": -1.0}, "speedup"),
        ({"surprise": 1}, "surprise: Extra inputs are not permitted"),
        ({"hardware": {"id": "x"}}, "hardware.class"),
    ],
)
def test_a_bad_outcome_is_one_clear_error(change, fragment):
    data = {**contract_dict(), **change}
    with pytest.raises(InvalidRecordError, match="invalid outcome record") as info:
        parse_outcome(data)
    assert fragment in str(info.value)


def test_outcome_that_is_not_json_is_rejected():
    with pytest.raises(InvalidRecordError, match="not valid JSON"):
        parse_outcome("{nope")


def test_attempt_normalises_the_layer_and_rejects_odd_ids():
    at = synthetic.attempt("run-1", 0, "softmax", layer="Memory Layout")
    assert at.layer == "memory_layout" and at.id == "run-1:s0"
    with pytest.raises(InvalidRecordError, match="not a valid id"):
        Attempt.parse({**at.to_json(), "run_id": "bad id/with slash"})
    with pytest.raises(InvalidRecordError, match="layer"):
        Attempt.parse({**at.to_json(), "layer": "!!"})


def test_attempt_identity_ignores_the_time_it_was_made():
    a = synthetic.attempt("r", 1, "softmax", created_at=1.0)
    b = synthetic.attempt("r", 1, "softmax", created_at=2.0)
    c = synthetic.attempt("r", 1, "softmax", speedup=2.0, created_at=1.0)
    assert a.content_hash() == b.content_hash() != c.content_hash()


def test_graph_record_with_a_missing_field_names_it():
    with pytest.raises(RecordShapeError, match="DecisionRecord record lacks field 'run_id'"):
        DecisionRecord.from_record({"id": "x"})


def test_an_outcome_record_from_before_issue_31_is_refused_on_the_wire_not_misread():
    """A memory server of the other side of the speedup rename (`speedup_measured`, no `speedup_usable`) sends an
    Outcome this client cannot read: one error naming the missing field, never a number with the other meaning."""
    from kope.memory import wire
    from kope.memory.records import OutcomeNodeRecord

    old = {
        "id": "r0:s3",
        "status": "incorrect",
        "cases_total": 4,
        "cases_passed": 3,
        "speedup": 0.0,
        "speedup_measured": 1.3,
        "error_kind": "incorrect",
        "error_excerpt": None,
        "timings_valid": True,
        "confidence": 1.0,
        "r": 0.0,
        "label": "negative",
    }
    with pytest.raises(wire.WireFormatError, match="speedup_usable: Field required") as err:
        wire.load(OutcomeNodeRecord, old)
    assert err.value.exit_code == 16
    new = {k: v for k, v in old.items() if k != "speedup_measured"} | {"speedup": 1.3, "speedup_usable": 0.0}
    record = wire.load(OutcomeNodeRecord, new)
    assert (record.speedup, record.speedup_usable) == (1.3, 0.0)
