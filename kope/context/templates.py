"""Prompt templates (langchain-core) with declared inputs, checked when built.

Two messages: a system message (role, target rules, the response protocol)
and a human message (the assembled context). Each template declares its
inputs; a template whose placeholders differ from its declaration fails at
import (construction), and rendering with a missing or unexpected input raises
:class:`PromptError` naming it. Values are inserted verbatim (braces in code
are safe).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from langchain_core.messages import BaseMessage
from langchain_core.prompts import ChatPromptTemplate

from kope.context.protocol import PROTOCOL_TEXT
from kope.errors import KopeError


class PromptError(KopeError):
    """A prompt template was built or rendered with the wrong inputs."""

    exit_code = 2


SYSTEM_TEMPLATE = """You are an expert performance engineer who writes fast, correct kernels for {target_description}.
You improve one operator at a time. Each answer is ONE attempt: a single decision and the complete candidate file.

Rules for the {target} target:
{target_rules}

Correctness comes first: the candidate is checked against the PyTorch reference on every case (several seeds,
fresh inputs) before it is timed. It must not call the reference operator or heavy torch compute ops in
forward, cache outputs between calls, mutate inputs, spawn threads that outlive forward, or touch files or the network.

{protocol}"""

HUMAN_TEMPLATE = "{context}"

TARGET_RULES = {
    "cpu": (
        "- Write C/C++ with OpenMP and SIMD (compiled with -O3 -march=native -fopenmp) through the harness's fast\n"
        "  compile path (harness.cpu) or torch.utils.cpp_extension.load_inline.\n"
        "- Work on contiguous float buffers; handle sizes that are not multiples of the vector width.\n"
        "- The thread count is fixed by the harness; use OpenMP's default team."
    ),
    "triton": (
        "- Write Triton kernels (@triton.jit) launched from ModelNew.forward on CUDA tensors.\n"
        "- Mask loads and stores for ragged edges; choose BLOCK sizes as powers of two."
    ),
    "cuda": (
        "- Write CUDA C++ via torch.utils.cpp_extension.load_inline and launch it from ModelNew.forward.\n"
        "- Check bounds in every kernel; prefer coalesced, vectorized global accesses."
    ),
}
TARGET_DESCRIPTIONS = {
    "cpu": "x86-64 and Arm CPUs (C/C++ with OpenMP and SIMD)",
    "triton": "NVIDIA GPUs (Triton)",
    "cuda": "NVIDIA GPUs (CUDA C++)",
}


@dataclass(frozen=True)
class DeclaredTemplate:
    """A chat template plus the exact set of inputs it declares."""

    template: ChatPromptTemplate
    inputs: frozenset[str]

    @classmethod
    def build(cls, messages: list[tuple[str, str]], inputs: set[str]) -> DeclaredTemplate:
        template = ChatPromptTemplate.from_messages(messages)
        found = set(template.input_variables)
        if found != set(inputs):
            missing, extra = sorted(set(inputs) - found), sorted(found - set(inputs))
            raise PromptError(
                f"template placeholders differ from its declared inputs: missing {missing}, undeclared {extra}"
            )
        return cls(template, frozenset(inputs))

    def render(self, values: Mapping[str, str]) -> list[BaseMessage]:
        missing = sorted(self.inputs - set(values))
        extra = sorted(set(values) - self.inputs)
        if missing or extra:
            raise PromptError(f"prompt inputs do not match the template: missing {missing}, unexpected {extra}")
        return self.template.format_messages(**{k: str(v) for k, v in values.items()})


SYSTEM_INPUTS = {"target", "target_description", "target_rules", "protocol"}
PROPOSER_PROMPT = DeclaredTemplate.build(
    [("system", SYSTEM_TEMPLATE), ("human", HUMAN_TEMPLATE)], SYSTEM_INPUTS | {"context"}
)


def system_values(target: str) -> dict[str, str]:
    if target not in TARGET_RULES:
        raise PromptError(f"unknown target {target!r} (known: {', '.join(sorted(TARGET_RULES))})")
    return {
        "target": target,
        "target_description": TARGET_DESCRIPTIONS[target],
        "target_rules": TARGET_RULES[target],
        "protocol": PROTOCOL_TEXT,
    }


def render_system(target: str) -> str:
    """The system message text alone (counted as S against the budget)."""
    return str(PROPOSER_PROMPT.render({**system_values(target), "context": ""})[0].content)


def render_messages(target: str, context: str) -> list[BaseMessage]:
    return PROPOSER_PROMPT.render({**system_values(target), "context": context})
