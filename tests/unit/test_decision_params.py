"""A decision's parameters: the loop's facts and the proposer's extension, stored as one flat JSON object."""

import pytest

from kope.agent.offline import TemplateChoice
from kope.memory import DecisionParams, synthetic


def test_the_stored_object_is_flat_as_every_journal_and_graph_so_far():
    params = DecisionParams(backtracked=True, cited=("a:s1",), extension={"template": "pointwise", "settings": {}})
    stored = {"template": "pointwise", "settings": {}, "backtracked": True, "cited": ["a:s1"]}
    assert params.to_json() == stored
    assert DecisionParams.from_json(stored) == params


def test_nothing_to_say_is_stored_as_null_and_read_back_empty():
    assert DecisionParams().to_json() is None
    assert DecisionParams.from_json(None) == DecisionParams() == DecisionParams.from_json("{}")


def test_a_proposer_cannot_claim_the_loops_keys():
    with pytest.raises(ValueError, match="loop's keys"):
        DecisionParams(extension={"backtracked": True})


def test_an_attempt_takes_the_stored_json_and_writes_it_back_unchanged():
    stored = {"template": "row_norm", "settings": {"lanes": 16}, "cited": ["x:s0"]}
    attempt = synthetic.attempt("r", 0, "softmax", params=stored)
    assert attempt.params == DecisionParams(
        cited=("x:s0",), extension={"template": "row_norm", "settings": {"lanes": 16}}
    )
    assert attempt.to_json()["params"] == stored


def test_the_offline_proposers_choice_is_its_extension():
    choice = TemplateChoice(template="pointwise", settings={"unroll": 2}, change={"knob": "unroll", "from": 1, "to": 2})
    params = DecisionParams(backtracked=True, extension=choice.to_extension())
    assert TemplateChoice.of(params) == choice
    assert TemplateChoice.of(params.to_json()) == choice  # the stored JSON reads back the same
    assert TemplateChoice.of(None) == TemplateChoice()
