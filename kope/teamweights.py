"""Team weights: how much a source team's attempts count in retrieval (``kope.memory.ranking``).

Here, apart from the ranking, so that configuration (``[memory] team_weights``,
``KOPE_TEAM_WEIGHTS``) and the memory server's request models validate them the same way
without importing the memory layer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

OTHER_TEAMS = "*"
_TEAM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def check_team_weights(weights: Mapping[str, float] | Iterable[tuple[str, float]]) -> tuple[tuple[str, float], ...]:
    """Validated (team, weight) pairs in name order; ValueError names the first bad entry.

    A team is a team name (1-64 letters, digits, '_', '.', '-') or ``*`` (every team not named);
    a weight is a number in [0, 1] (0: leave that team's attempts out)."""
    pairs = list(weights.items()) if isinstance(weights, Mapping) else [tuple(p) for p in weights]
    out: dict[str, float] = {}
    for pair in pairs:
        if len(pair) != 2:
            raise ValueError(f"a team weight is a (team, weight) pair, got {pair!r}")
        team, weight = pair
        if not isinstance(team, str) or not (team == OTHER_TEAMS or _TEAM.match(team)):
            raise ValueError(f"team {team!r}: a team name is 1-64 letters, digits, '_', '.', '-' (or '*' for the rest)")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 <= float(weight) <= 1.0:
            raise ValueError(f"team {team!r}: the weight must be a number from 0 to 1, got {weight!r}")
        if team in out:
            raise ValueError(f"team {team!r} is weighted twice")
        out[team] = float(weight)
    return tuple(sorted(out.items()))


def parse_team_weights(text: str) -> tuple[tuple[str, float], ...]:
    """``"gpu-a=1,cpu-b=0.5,*=0.2"`` (the form of ``KOPE_TEAM_WEIGHTS``) as validated pairs."""
    pairs: list[tuple[str, float]] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        team, sep, value = part.partition("=")
        if not sep:
            raise ValueError(f"{part!r}: write TEAM=WEIGHT, e.g. gpu-a=0.5 (entries separated by commas)")
        try:
            weight = float(value)
        except ValueError:
            raise ValueError(f"team {team.strip()!r}: the weight must be a number from 0 to 1, got {value!r}") from None
        pairs.append((team.strip(), weight))
    return check_team_weights(pairs)
