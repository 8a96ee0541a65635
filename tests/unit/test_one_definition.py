"""One definition per concept: the outcome record, the vocabulary, the harness boundary, typed layers.

These read the source (the AST of every module of kope/ and harness/, task files and example
kernels excluded: they are data), so a second copy or an untyped shortcut fails here at once.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from harness.record import Outcome
from harness.vocabulary import FAMILIES, LAYERS, STATUSES, TARGETS
from kope.agent import PROPOSERS
from kope.context import POLICIES

REPO = Path(__file__).resolve().parents[2]
DATA = ("harness/suite/tasks/", "harness/suite/candidates/")
SOURCES = {
    path.relative_to(REPO).as_posix(): path
    for folder in ("kope", "harness")
    for path in sorted((REPO / folder).rglob("*.py"))
    if not path.relative_to(REPO).as_posix().startswith(DATA)
}
TREES = {rel: ast.parse(path.read_text(encoding="utf-8"), rel) for rel, path in SOURCES.items()}
OUTCOME_PARTS = ("Outcome", "CaseResult", "TimingStats", "Hardware", "GpuInfo", "Status")
VOCABULARIES = {
    "families": (FAMILIES, "harness/vocabulary.py"),
    "layers": (LAYERS, "harness/vocabulary.py"),
    "statuses": (STATUSES, None),  # defined by the Status enum (harness/vocabulary.py), not a literal
    "targets": (TARGETS, "harness/vocabulary.py"),
    "policies": (POLICIES, "kope/context/__init__.py"),
    "proposers": (PROPOSERS, "kope/agent/__init__.py"),
}


def _nodes(kind):
    for rel, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, kind):
                yield rel, node


def _strings(node: ast.AST) -> list[str]:
    return [e.value for e in getattr(node, "elts", []) if isinstance(e, ast.Constant) and isinstance(e.value, str)]


@pytest.mark.parametrize("name", OUTCOME_PARTS)
def test_each_part_of_the_outcome_record_is_defined_once_in_harness_record(name):
    where = [rel for rel, node in _nodes(ast.ClassDef) if node.name == name]
    expected = "harness/vocabulary.py" if name == "Status" else "harness/record.py"
    assert where == [expected]


def test_no_module_builds_an_outcome_record_by_hand():
    # a dict literal made of the record's own fields is a second, hand-kept copy of the record
    fields = {f.name for f in dataclasses.fields(Outcome)} | {"schema"}
    found = []
    for rel, node in _nodes(ast.Dict):
        keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
        if rel != "harness/record.py" and len(keys) >= 4 and keys <= fields:
            found.append(f"{rel}:{node.lineno}")
    assert found == [], "build harness.record.Outcome (e.g. Outcome.format_error) instead"


@pytest.mark.parametrize("vocabulary", VOCABULARIES)
def test_each_vocabulary_is_listed_once(vocabulary):
    # a literal holding most of a vocabulary is a copy of it (a few of its words, e.g. the statuses that
    # stop an evaluation, are a selection); every click.Choice takes the vocabulary itself
    words, home = VOCABULARIES[vocabulary]
    lists = []
    for rel, node in _nodes((ast.Tuple, ast.List, ast.Set)):
        strings = set(_strings(node))
        if len(strings & set(words)) >= max(2, 0.7 * len(words)):
            lists.append(f"{rel}:{node.lineno}")
    assert [place.split(":")[0] for place in lists] == ([home] if home else []), lists


def test_every_choice_of_the_cli_takes_a_vocabulary():
    literal = [
        f"{rel}:{node.lineno}"
        for rel, node in _nodes(ast.Call)
        if isinstance(node.func, ast.Attribute)
        and node.func.attr == "Choice"
        and node.args
        and isinstance(node.args[0], (ast.List, ast.Tuple))
        and len(node.args[0].elts) > 1
    ]
    assert literal == []


def test_only_the_boundary_module_imports_the_harness():
    importers = set()
    for rel, node in _nodes((ast.Import, ast.ImportFrom)):
        if not rel.startswith("kope/"):
            continue
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        if any(n == "harness" or n.startswith("harness.") for n in names):
            importers.add(rel)
    assert importers == {"kope/boundary.py"}


def test_nothing_above_the_memory_holds_the_graph_state_or_retrieval_untyped():
    pattern = re.compile(r"\b(graph|state|retrieval|memory|hardware)\s*:\s*(Any|dict\[str, Any\])\b")
    found = [
        f"{rel}:{i}"
        for rel, path in SOURCES.items()
        if rel.startswith("kope/")
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def test_sync_does_not_reach_into_the_graph_object():
    sync = TREES["kope/memory/sync.py"]
    imported = {node.module for node in ast.walk(sync) if isinstance(node, ast.ImportFrom) and node.module is not None}
    assert "kope.memory.graph" not in imported
    private = [f"{rel}:{node.lineno}" for rel, node in _nodes(ast.Attribute) if node.attr.startswith("_replay")]
    assert private == []
