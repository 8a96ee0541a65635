"""The token budget of one prompt.

    B_k = max(0, W - S - G - R)

W is the model's context window, S the allowance for the system prompt, G the
room kept for the model's answer and R a recency reserve (headroom for the
difference between our token counter and the model's own tokenizer, and for
the latest feedback growing between steps). The human message, with the hot,
warm and cold tiers in it, must fit in B_k; the warm tier in at most Q_w, the
cold tier in at most Q_c of what is left after hot.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kope.config import ContextSettings


@dataclass(frozen=True)
class Budget:
    window: int  # W
    system: int  # S
    generation: int  # G
    recency: int  # R
    warm_cap: int  # Q_w
    cold_cap: int  # Q_c

    @classmethod
    def from_settings(cls, settings: ContextSettings) -> Budget:
        return cls(
            settings.window,
            settings.system,
            settings.generation,
            settings.recency,
            settings.warm_cap,
            settings.cold_cap,
        )

    @property
    def total(self) -> int:
        """B_k: what the human message (all tiers) may use."""
        return max(0, self.window - self.system - self.generation - self.recency)

    def with_total(self, total: int) -> Budget:
        """The same budget with B_k set to ``total`` (the window is adjusted)."""
        return replace(self, window=max(0, total) + self.system + self.generation + self.recency)

    def to_dict(self) -> dict[str, int]:
        return {
            "W": self.window,
            "S": self.system,
            "G": self.generation,
            "R": self.recency,
            "Q_w": self.warm_cap,
            "Q_c": self.cold_cap,
            "B_k": self.total,
        }
