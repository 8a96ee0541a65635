"""The Experience Graph memory: every attempt journaled, then kept in Neo4j.

Everything above this package uses the memory through ``Memory``
(``kope.memory.protocol``), opened by ``open_memory``::

    from kope.memory import Attempt, RetrievalQuery, RunSpec, TaskSpec, UsedItem, open_memory

    with open_memory(config) as memory:
        memory.start_run(RunSpec(task=TaskSpec(...), hardware=outcome.hardware, ...))
        result = memory.record_attempt(Attempt(run_id=..., step=..., title=..., layer=..., parent_id=...,
                                               code=..., outcome=outcome, used=[UsedItem(...)]))
        found = memory.retrieve(RetrievalQuery.from_outcome(outcome, layer=...), k=8)
        state = memory.step_state(run_id)   # what the next step reads; run_state(run_id) to resume

``open_memory`` (``kope.memory.connect``) chooses the implementation: ``ExperienceGraph`` (Bolt,
straight to Neo4j) or ``RemoteMemory`` (``kope.memory.remote``, a shared memory server).
"""

from __future__ import annotations

import logging as _logging

from kope.memory.connect import open_memory
from kope.memory.graph import ExperienceGraph
from kope.memory.journal import Journal
from kope.memory.outcome import parse_hardware, parse_outcome
from kope.memory.params import DecisionParams
from kope.memory.protocol import ContextMemory, Memory, Retriever, StateReader
from kope.memory.ranking import DEFAULT_WEIGHTS, RankingWeights
from kope.memory.recorder import RecordResult, RunResult
from kope.memory.records import DecisionRecord, InsightRecord, OutcomeNodeRecord, RunRecord, StoredCase
from kope.memory.retrieval import Lineage, RetrievalQuery, RetrievalResult
from kope.memory.specs import Attempt, DeployedFigures, KnowledgeDoc, RunSpec, TaskSpec, UsedItem
from kope.memory.state import AttemptState, RunState, StepState
from kope.memory.tuning import TuningData, TuningQuery, TuningRecord

__all__ = [
    "DEFAULT_WEIGHTS",
    "Attempt",
    "AttemptState",
    "DeployedFigures",
    "ContextMemory",
    "DecisionParams",
    "DecisionRecord",
    "ExperienceGraph",
    "InsightRecord",
    "Journal",
    "KnowledgeDoc",
    "Lineage",
    "Memory",
    "OutcomeNodeRecord",
    "RankingWeights",
    "RecordResult",
    "RetrievalQuery",
    "RetrievalResult",
    "Retriever",
    "RunRecord",
    "RunResult",
    "RunSpec",
    "RunState",
    "StateReader",
    "StepState",
    "StoredCase",
    "TaskSpec",
    "TuningData",
    "TuningQuery",
    "TuningRecord",
    "UsedItem",
    "open_memory",
    "parse_hardware",
    "parse_outcome",
]


# The driver logs server notifications (e.g. "property key does not exist" on a
# fresh database) as warnings; without a handler Python would print them on
# stderr in the middle of CLI output. They stay visible with `kope -v`.
_logging.getLogger("neo4j.notifications").addHandler(_logging.NullHandler())
