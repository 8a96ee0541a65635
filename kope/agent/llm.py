"""Chat backends for the LLM proposer: any OpenAI-compatible endpoint, or a langchain-core chat model.

Both return a :class:`ChatResult` (text + token usage). Transient failures
(rate limits, timeouts, connection errors, 5xx) are retried with exponential
backoff that honours ``retry-after``; the number of retries is part of the
result. Anything else (bad key, unknown model, bad request) is an
:class:`LLMError` at once. After the last retry an :class:`LLMUnavailableError`
is raised: an outage is not an attempt, so the loop stops the run (which can
be resumed) instead of recording it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage

from kope.errors import KopeError

log = logging.getLogger("kope.agent")


class LLMError(KopeError):
    """The endpoint refused the request (authentication, model, request shape)."""

    exit_code = 10


class LLMUnavailableError(LLMError):
    """The endpoint kept failing transiently until the retries ran out."""


@dataclass(frozen=True)
class ChatResult:
    text: str
    prompt_tokens: int
    completion_tokens: int
    model: str
    retries: int
    latency_s: float


class ChatBackend(Protocol):
    model: str

    def complete(self, messages: Sequence[BaseMessage]) -> ChatResult: ...


def _role(message: BaseMessage) -> str:
    return {"system": "system", "human": "user", "ai": "assistant"}.get(message.type, "user")


class OpenAIChat:
    """An OpenAI-compatible endpoint through the official ``openai`` client."""

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        timeout: float = 120.0,
        max_retries: int = 5,
        temperature: float | None = None,
        max_tokens: int | None = None,
        backoff_base: float = 1.0,
        backoff_cap: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        import openai

        self._openai = openai
        self.model = model
        self.max_retries = max_retries
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._sleep = sleep
        # Local servers (vLLM, Ollama) accept any key; the client insists on one.
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key or "not-needed", timeout=timeout, max_retries=0)
        self.where = base_url or "the OpenAI API"

    def _delay(self, attempt: int, error: Exception) -> float:
        response = getattr(error, "response", None)
        if response is not None:
            value = response.headers.get("retry-after")
            try:
                if value is not None:
                    return min(float(value), self.backoff_cap)
            except ValueError:
                pass
        return float(min(self.backoff_base * (2**attempt), self.backoff_cap))

    def complete(self, messages: Sequence[BaseMessage]) -> ChatResult:
        oa = self._openai
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": _role(m), "content": str(m.content)} for m in messages],
        }
        if self.temperature is not None:
            payload["temperature"] = self.temperature
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        transient = (oa.RateLimitError, oa.APITimeoutError, oa.APIConnectionError, oa.InternalServerError)
        started = time.monotonic()
        for attempt in range(self.max_retries + 1):
            try:
                completion = self._client.chat.completions.create(**payload)
            except transient as exc:
                if attempt == self.max_retries:
                    raise LLMUnavailableError(
                        f"{self.where} kept failing after {self.max_retries} retries: {type(exc).__name__}: {_short(exc)}"
                    ) from None
                delay = self._delay(attempt, exc)
                log.warning(
                    "LLM %s (%s); retry %d/%d in %.1f s",
                    type(exc).__name__,
                    _short(exc),
                    attempt + 1,
                    self.max_retries,
                    delay,
                )
                self._sleep(delay)
                continue
            except oa.APIStatusError as exc:
                raise LLMError(f"{self.where} refused the request ({exc.status_code}): {_short(exc)}") from None
            except oa.OpenAIError as exc:
                raise LLMError(f"{self.where}: {type(exc).__name__}: {_short(exc)}") from None
            choice = completion.choices[0] if completion.choices else None
            text = (choice.message.content if choice and choice.message else None) or ""
            usage = completion.usage
            return ChatResult(
                text=text,
                prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                model=completion.model or self.model,
                retries=attempt,
                latency_s=time.monotonic() - started,
            )
        raise AssertionError("unreachable")


class LangChainChat:
    """Any langchain-core chat model (``BaseChatModel``) passed in by a library user."""

    def __init__(self, chat_model: BaseChatModel, *, model: str | None = None) -> None:
        self.chat_model = chat_model
        self.model = (
            model
            or getattr(chat_model, "model_name", None)
            or getattr(chat_model, "model", None)
            or type(chat_model).__name__
        )

    def complete(self, messages: Sequence[BaseMessage]) -> ChatResult:
        started = time.monotonic()
        try:
            reply = self.chat_model.invoke(list(messages))
        except Exception as exc:  # a user-supplied model can raise anything
            raise LLMError(f"the chat model {self.model} failed: {type(exc).__name__}: {_short(exc)}") from None
        text = reply.content if isinstance(reply, AIMessage) else getattr(reply, "content", str(reply))
        if isinstance(text, list):  # content blocks
            text = "".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in text)
        usage = getattr(reply, "usage_metadata", None) or {}
        return ChatResult(
            text=str(text),
            prompt_tokens=int(usage.get("input_tokens", 0) or 0),
            completion_tokens=int(usage.get("output_tokens", 0) or 0),
            model=self.model,
            retries=0,
            latency_s=time.monotonic() - started,
        )


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
