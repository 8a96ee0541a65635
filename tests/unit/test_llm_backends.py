"""Chat backends against the replay server and a langchain fake model."""

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from kope.agent.llm import LangChainChat, LLMError, LLMUnavailableError, OpenAIChat
from tests.support.llm_replay import Fail, ReplayLLM, Reply, Stall

MESSAGES = [SystemMessage("be brief"), HumanMessage("optimize relu")]


def backend(server, **kw):
    sleeps = []
    chat = OpenAIChat(model="m", base_url=server.url, api_key="k", sleep=sleeps.append, **kw)
    return chat, sleeps


def test_reply_text_and_usage_are_returned():
    with ReplayLLM([Reply("done", prompt_tokens=40, completion_tokens=3)], api_key="k") as server:
        chat, _ = backend(server)
        result = chat.complete(MESSAGES)
    assert (result.text, result.prompt_tokens, result.completion_tokens, result.retries) == ("done", 40, 3, 0)
    assert [m["role"] for m in server.requests[0].body["messages"]] == ["system", "user"]


def test_rate_limit_and_5xx_are_retried_with_backoff_honouring_retry_after():
    steps = [Fail(429, "slow down", {"retry-after": "7"}), Fail(503, "busy"), Reply("ok")]
    with ReplayLLM(steps) as server:
        chat, sleeps = backend(server, backoff_base=0.5)
        result = chat.complete(MESSAGES)
    assert result.text == "ok" and result.retries == 2
    assert sleeps == [7.0, 1.0]  # retry-after, then 0.5 * 2**1


def test_timeouts_are_retried():
    with ReplayLLM([Stall(2.0), Reply("late but fine")]) as server:
        chat, sleeps = backend(server, timeout=0.5, max_retries=2)
        result = chat.complete(MESSAGES)
    assert result.text == "late but fine" and result.retries >= 1


def test_giving_up_after_retries_is_a_typed_error():
    with ReplayLLM([Fail(500, "down")] * 3) as server:
        chat, sleeps = backend(server, max_retries=2)
        with pytest.raises(LLMUnavailableError, match="after 2 retries"):
            chat.complete(MESSAGES)
    assert len(sleeps) == 2


def test_bad_key_is_not_retried():
    with ReplayLLM([Reply("never")], api_key="right") as server:
        chat = OpenAIChat(model="m", base_url=server.url, api_key="wrong", sleep=lambda s: None)
        with pytest.raises(LLMError, match=r"refused the request \(401\)"):
            chat.complete(MESSAGES)
        assert server.remaining == 1


def test_langchain_chat_model_is_accepted():
    fake = GenericFakeChatModel(messages=iter([AIMessage("from langchain")]))
    result = LangChainChat(fake, model="fake").complete(MESSAGES)
    assert result.text == "from langchain" and result.model == "fake"
