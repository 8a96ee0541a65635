"""One definition per concept: the outcome record, the vocabulary, the harness boundary, typed layers, the
Decision and its views, the knowledge document.

These read the source (the AST of every module of kope/ and harness/, task files and example
kernels excluded: they are data), so a second copy or an untyped shortcut fails here at once.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import get_type_hints

import pytest

from harness.record import Outcome
from harness.vocabulary import FAMILIES, LAYERS, STATUSES, TARGETS
from kope.agent import PROPOSERS
from kope.agent.proposal import ProposalRequest
from kope.context import POLICIES
from kope.context.hot import HotState
from kope.context.items import digest_item, history_item
from kope.context.knowledge import load_knowledge
from kope.memory.records import DecisionRecord
from kope.memory.specs import KnowledgeDoc
from kope.memory.state import AttemptState, StepState

REPO = Path(__file__).resolve().parents[2]
DATA = ("harness/suite/tasks/", "harness/suite/candidates/")
SOURCES = {
    path.relative_to(REPO).as_posix(): path
    for folder in ("kope", "harness")
    for path in sorted((REPO / folder).rglob("*.py"))
    if not path.relative_to(REPO).as_posix().startswith(DATA)
}


@functools.cache
def _trees() -> dict[str, ast.Module]:
    """Every module's AST, parsed once per process and only by the tests that read it (not at collection)."""
    return {rel: ast.parse(path.read_text(encoding="utf-8"), rel) for rel, path in SOURCES.items()}


@functools.cache
def _all_nodes() -> tuple[tuple[str, ast.AST], ...]:
    """(module, node) for every node of every module, in ``ast.walk`` order, walked once."""
    return tuple((rel, node) for rel, tree in _trees().items() for node in ast.walk(tree))


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
    for rel, node in _all_nodes():
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
    assert importers == {"kope/boundary/tasks.py", "kope/boundary/evaluation.py"}


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
    sync = _trees()["kope/memory/sync.py"]
    imported = {node.module for node in ast.walk(sync) if isinstance(node, ast.ImportFrom) and node.module is not None}
    assert "kope.memory.graph" not in imported
    private = [f"{rel}:{node.lineno}" for rel, node in _nodes(ast.Attribute) if node.attr.startswith("_replay")]
    assert private == []


# -- one Decision: the views above the memory are AttemptState, never a hand-kept copy of its fields -----------
# DecisionRecord's own facts (identity, hardware and token counts left out: many records carry those)
DECISION_FACTS = {f.name for f in dataclasses.fields(DecisionRecord)} - {
    "id",
    "run_id",
    "operator",
    "family",
    "target",
    "hw_id",
    "hw_class",
    "vendor",
    "created_at",
    "prompt_tokens",
    "completion_tokens",
}
# rows of other statements and the write side, not views of a read Decision; each says why it has its own shape
OTHER_SHAPES = {
    "kope/memory/records.py:DecisionRecord": "the graph's row of a decision: the one definition",
    "kope/memory/specs.py:Attempt": "what the loop writes (validated input), not a read decision",
    "kope/memory/retrieval.py:Hit": "a decision of another run as retrieval ranks it, with its diff and cases",
    "kope/memory/retrieval.py:StepSummary": "an ancestor on a retrieved lineage's chain",
    "kope/memory/retrieval.py:BranchSummary": "a sibling branch of a retrieved lineage",
    "kope/memory/lineage.py:LineageNode": "a node of the lineage page (every run of an operator)",
    "kope/memory/present.py:DecisionFacts": "a row of the presentation statement, across namespaces",
    "kope/memory/tuning.py:TuningRecord": "a training record of the tuner, across runs",
    "kope/agent/loop.py:StepReport": "the loop's report of the step it just recorded (summary.json)",
}


def _declared_fields(node: ast.ClassDef) -> set[str]:
    return {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}


def test_no_class_keeps_a_copy_of_the_decisions_fields():
    copies = {
        f"{rel}:{node.name}": sorted(_declared_fields(node) & DECISION_FACTS)
        for rel, node in _nodes(ast.ClassDef)
        if len(_declared_fields(node) & DECISION_FACTS) >= 5
    }
    unexplained = {where: fields for where, fields in copies.items() if where not in OTHER_SHAPES}
    assert unexplained == {}, "read the decision through kope.memory.state.AttemptState (its .decision) instead"
    assert sorted(OTHER_SHAPES) == sorted(copies), "an exception that no longer applies: remove it from OTHER_SHAPES"


def test_the_decision_views_are_attempt_states():
    # the one Decision type: the decision's row, what the target said, the kernel; nothing copied out of them
    assert [f.name for f in dataclasses.fields(AttemptState)] == ["decision", "outcome", "code"]
    assert get_type_hints(AttemptState)["decision"] is DecisionRecord
    request, hot = get_type_hints(ProposalRequest), get_type_hints(HotState)
    assert request["parent"] == AttemptState | None and request["history"] == Sequence[AttemptState]
    assert hot["incumbent"] == AttemptState | None and hot["latest"] == AttemptState | None
    assert get_type_hints(StepState.history.fget)["return"] == tuple[AttemptState, ...]
    items = get_type_hints(digest_item)["entries"], get_type_hints(history_item)["entry"]
    assert items == (Sequence[AttemptState], AttemptState)


def test_knowledge_doc_is_defined_once_and_loaded_as_the_memory_stores_it():
    where = [rel for rel, node in _nodes(ast.ClassDef) if node.name == "KnowledgeDoc"]
    assert where == ["kope/memory/specs.py"]
    assert all(isinstance(doc, KnowledgeDoc) for doc in load_knowledge())
