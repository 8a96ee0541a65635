"""The response protocol parser: robust to common deviations, explicit about failures."""

from harness.vocabulary import LAYERS
from kope.context.protocol import (
    PROTOCOL_TEXT,
    FormatProblem,
    ProposedDecision,
    normalize_layer,
    parse_response,
)

CODE = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


def reply(header: str, code: str = CODE, lang: str = "python") -> str:
    return f"{header}\n\n```{lang}\n{code}```\n"


def test_well_formed_response_is_parsed():
    text = reply(
        "DECISION\ntitle: Split rows over threads\nlayer: parallelization\nrationale: rows are independent.\nevidence: D-1, I-2\nEND DECISION"
    )
    parsed = parse_response(text)
    assert isinstance(parsed, ProposedDecision)
    assert parsed.title == "Split rows over threads"
    assert parsed.layer == "parallelization"
    assert parsed.evidence == ("D-1", "I-2")
    assert "class ModelNew" in parsed.code and not parsed.warnings


def test_markdown_decorated_keys_and_missing_end_are_accepted():
    text = reply(
        "## DECISION\n**Title:** Tile by 64\n**Layer**: Blocking\n**Rationale**: fits L2.\nmore reasoning here\n**Evidence**: none"
    )
    parsed = parse_response(text)
    assert isinstance(parsed, ProposedDecision)
    assert parsed.layer == "tiling" and parsed.evidence == ()
    assert parsed.rationale == "fits L2. more reasoning here"


def test_the_block_defining_model_new_is_chosen_among_several():
    text = "title: x\nlayer: fusion\n```bash\nmake\n```\n```python\nprint('helper')\n```\n```python\n" + CODE + "```"
    parsed = parse_response(text)
    assert isinstance(parsed, ProposedDecision) and parsed.code.startswith("import torch")


def test_unlabelled_fence_without_closing_is_accepted():
    parsed = parse_response("title: t\nlayer: algorithm\n```\n" + CODE)
    assert isinstance(parsed, ProposedDecision) and "ModelNew" in parsed.code


def test_unknown_layer_becomes_other_with_a_warning():
    parsed = parse_response(reply("title: t\nlayer: magic"))
    assert isinstance(parsed, ProposedDecision)
    assert parsed.layer == "other" and any("magic" in w for w in parsed.warnings)


def test_no_code_is_a_format_problem():
    parsed = parse_response("DECISION\ntitle: I would tile it\nlayer: tiling\nEND DECISION\nSorry, no code today.")
    assert isinstance(parsed, FormatProblem)
    assert parsed.error_kind == "format_error:no_code" and parsed.title == "I would tile it"


def test_code_without_model_new_is_a_format_problem():
    parsed = parse_response(reply("title: t", code="def f():\n    pass\n"))
    assert isinstance(parsed, FormatProblem) and parsed.kind == "no_model_new"


def test_two_different_candidates_are_refused():
    other = CODE.replace("return x", "return x * 1")
    parsed = parse_response(reply("title: t") + f"\n```python\n{other}```\n")
    assert isinstance(parsed, FormatProblem) and parsed.kind == "several_candidates"


def test_empty_response_is_a_format_problem():
    assert parse_response("   ").kind == "empty"
    assert parse_response(None).kind == "empty"


def test_protocol_text_lists_every_layer():
    for layer in LAYERS:
        assert layer in PROTOCOL_TEXT
    assert normalize_layer("SIMD") == ("vectorization", None)
