"""The LLM proposer: the assembled prompt to a chat backend, the reply parsed by the response protocol."""

from __future__ import annotations

from langchain_core.language_models import BaseChatModel

from kope.agent.llm import ChatBackend, LangChainChat, OpenAIChat
from kope.agent.proposal import Proposal, ProposalRequest
from kope.config import KopeConfig
from kope.context.protocol import FormatProblem, parse_response
from kope.errors import ConfigError


class LLMProposer:
    name = "llm"

    def __init__(self, chat: ChatBackend) -> None:
        self.chat = chat
        self.model = chat.model

    @classmethod
    def from_config(cls, config: KopeConfig) -> LLMProposer:
        llm = config.llm
        if not llm.model:
            raise ConfigError(
                "the llm proposer needs a model: set KOPE_LLM_MODEL (and KOPE_LLM_BASE_URL for a local or hosted "
                "OpenAI-compatible endpoint)",
                hint="or use --proposer offline",
            )
        return cls(
            OpenAIChat(
                model=llm.model,
                base_url=llm.base_url,
                api_key=llm.api_key,
                timeout=llm.timeout,
                max_retries=llm.max_retries,
                max_tokens=config.context.generation,
            )
        )

    @classmethod
    def from_langchain(cls, chat_model: BaseChatModel, model: str | None = None) -> LLMProposer:
        return cls(LangChainChat(chat_model, model=model))

    def propose(self, request: ProposalRequest) -> Proposal:
        result = self.chat.complete(request.context.messages)
        parsed = parse_response(result.text)
        if isinstance(parsed, FormatProblem):
            return Proposal(
                title=parsed.title or f"unusable response ({parsed.kind})",
                layer=parsed.layer or "other",
                thought=(parsed.rationale or "") + f"\n[format problem: {parsed.message}]",
                code=None,
                format_problem=parsed,
                prompt_tokens=result.prompt_tokens,
                completion_tokens=result.completion_tokens,
                model=result.model,
            )
        return Proposal(
            title=parsed.title,
            layer=parsed.layer,
            thought=parsed.rationale,
            code=parsed.code,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            model=result.model,
            cited=parsed.evidence,
            notes=parsed.warnings + ((f"{result.retries} retries",) if result.retries else ()),
        )
