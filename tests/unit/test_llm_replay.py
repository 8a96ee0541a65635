"""The replay server speaks enough OpenAI for the real client."""

import openai
import pytest

from tests.support.llm_replay import Fail, ReplayLLM, Reply


def test_real_openai_client_gets_scripted_replies_and_usage():
    with ReplayLLM([Reply("hello", prompt_tokens=11, completion_tokens=2)], api_key="k") as server:
        client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
        completion = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert completion.choices[0].message.content == "hello"
        assert completion.usage.prompt_tokens == 11 and completion.usage.completion_tokens == 2
        assert server.requests[0].text("user") == "hi"


def test_scripted_rate_limit_reaches_the_client_as_such():
    with ReplayLLM([Fail(429, "slow down", {"retry-after": "0"})]) as server:
        client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
        with pytest.raises(openai.RateLimitError):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])


def test_exhausted_script_fails_loudly():
    with ReplayLLM([]) as server:
        client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
        with pytest.raises(openai.InternalServerError, match="script exhausted"):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
