"""docs/cli.md names every command and every exit code, and each exit code has one row (one meaning).

As sqlite-utils' tests/test_docs.py does: the reference page cannot drift from the CLI.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import click

from kope.cli import cli

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")


def _commands(command: click.Command, path: list[str]) -> Iterator[str]:
    """Every command a user can run: the leaves, and the groups that do something without a subcommand."""
    if isinstance(command, click.Group):
        if command.invoke_without_command:
            yield " ".join(path)
        for name, sub in sorted(command.commands.items()):
            yield from _commands(sub, [*path, name])
    else:
        yield " ".join(path)


def _exit_codes_in_code() -> dict[int, list[str]]:
    """``exit_code = N`` in the body of every class of kope/ -> where."""
    found: dict[int, list[str]] = {}
    for path in sorted((REPO / "kope").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            for stmt in node.body:
                if (
                    isinstance(stmt, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "exit_code" for t in stmt.targets)
                    and isinstance(stmt.value, ast.Constant)
                ):
                    found.setdefault(stmt.value.value, []).append(f"{path.relative_to(REPO)}:{node.name}")
    return found


def _exit_table() -> list[int]:
    start = DOC.index("| exit code | meaning |")
    return [int(m.group(1)) for m in re.finditer(r"^\| (\d+) \|", DOC[start:], re.MULTILINE)]


def test_docs_cli_names_every_command():
    commands = list(_commands(cli, ["kope"]))
    assert len(commands) > 20  # the walk found the tree
    missing = [c for c in commands if not re.search(r"`" + re.escape(c) + r"[ `]", DOC)]
    assert missing == []


def test_docs_cli_lists_every_exit_code_once_and_no_other():
    table = _exit_table()
    assert len(table) == len(set(table)), "an exit code has two rows"
    in_code = _exit_codes_in_code()
    assert sorted(set(in_code) | {1}) == sorted(table), in_code
