"""Every parse in harness/ and kope/ goes through harness.pyparse.parse, one thread at a time (CPython 3.11's AST
constructor keeps its recursion depth per interpreter: two threads parsing at once failed an evaluation with
"SystemError: AST constructor recursion depth mismatch", python/cpython#106905)."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

from harness import pyparse

REPO = Path(__file__).resolve().parents[2]


def _bare_parses(trees: dict[str, ast.Module]) -> list[str]:
    """``ast.parse`` called directly anywhere but in harness/pyparse.py."""
    return [
        f"{rel}:{node.lineno}"
        for rel, tree in trees.items()
        if rel != "harness/pyparse.py"
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "parse"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "ast"
    ]


def test_no_module_calls_ast_parse_itself():
    from tests.unit.test_one_definition import _trees  # every module of kope/ and harness/, data excluded

    assert _bare_parses(_trees()) == []


def test_the_check_finds_a_bare_parse():
    trees = {"kope/x.py": ast.parse("import ast\ntree = ast.parse('x = 1')\n")}
    assert _bare_parses(trees) == ["kope/x.py:2"]


def test_threads_parse_at_once_and_each_gets_its_own_tree():
    source = (REPO / "harness" / "evaluate.py").read_text()
    expected = ast.dump(ast.parse(source))
    results: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(20):
                results.append(ast.dump(pyparse.parse(source, "evaluate.py")))
        except BaseException as exc:  # the test reports whatever a thread raised
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == 80 and all(r == expected for r in results)


def test_a_syntax_error_still_reaches_the_caller_and_frees_the_lock():
    try:
        pyparse.parse("def (:", "bad.py")
    except SyntaxError as exc:
        assert exc.filename == "bad.py"
    else:
        raise AssertionError("no SyntaxError")
    assert pyparse.parse("x = 1").body
