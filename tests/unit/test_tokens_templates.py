"""Token counting (offline-safe) and declared prompt templates."""

import pytest

from kope.context.templates import DeclaredTemplate, PromptError, render_messages, render_system
from kope.context.tokens import TokenCounter


def test_fallback_encoding_is_reported_not_hidden():
    counter = TokenCounter("some-local-model-7b", fallback="cl100k_base")
    assert not counter.exact
    assert counter.encoding_name.startswith("cl100k_base")
    assert "unknown to tiktoken" in counter.note


def test_counts_are_positive_and_additive_enough():
    counter = TokenCounter(None)
    a, b = "def f(x):\n    return x * 2\n", "for i in range(10):\n    pass\n"
    assert counter.count(a) > 5
    assert counter.count("") == 0
    assert counter.count(a + b) <= counter.count(a) + counter.count(b) + 1


def test_truncate_respects_the_token_limit():
    counter = TokenCounter(None)
    text = "word " * 500
    cut = counter.truncate(text, 50)
    assert counter.count(cut) <= 50 and text.startswith(cut)
    assert counter.truncate(text, 0) == ""


def test_template_with_undeclared_placeholder_fails_at_construction():
    with pytest.raises(PromptError, match="undeclared"):
        DeclaredTemplate.build([("system", "hi {name} {other}")], {"name"})


def test_rendering_with_missing_input_names_it():
    template = DeclaredTemplate.build([("human", "{a} and {b}")], {"a", "b"})
    with pytest.raises(PromptError, match=r"missing \['b'\]"):
        template.render({"a": "x"})


def test_code_with_braces_is_inserted_verbatim():
    messages = render_messages("cpu", "int main() { return 0; } {context}")
    assert messages[1].content == "int main() { return 0; } {context}"
    assert "DECISION" in messages[0].content and "cpu" in messages[0].content


def test_unknown_target_is_a_clear_error():
    with pytest.raises(PromptError, match="unknown target 'npu'"):
        render_system("npu")
