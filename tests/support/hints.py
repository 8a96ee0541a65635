"""Run a command line KOPE printed as a hint, as printed (``NAME=value ... kope ARGS``)."""

from __future__ import annotations

import re
import shlex


def parse_hint(text: str, marker: str) -> tuple[dict[str, str], list[str]]:
    """The first backquoted command after ``marker`` in ``text``: its environment settings and its kope arguments."""
    match = re.search(re.escape(marker) + r"[^`]*`([^`]+)`", text)
    assert match, f"no `command` after {marker!r} in:\n{text}"
    words = shlex.split(match.group(1))
    env = {}
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    assert words[0] == "kope", match.group(1)
    return env, words[1:]
