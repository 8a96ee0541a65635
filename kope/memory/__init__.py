"""The Experience Graph memory: every attempt journaled, then kept in Neo4j.

Public API (see ``graph.ExperienceGraph`` for the methods)::

    from kope.memory import ExperienceGraph, RunSpec, TaskSpec, Attempt, UsedItem, RetrievalQuery

    graph = ExperienceGraph.from_config(config)
    graph.start_run(RunSpec(task=TaskSpec(...), hardware=outcome.hardware, ...))
    result = graph.record_attempt(Attempt(run_id=..., step=..., title=..., layer=..., parent_id=...,
                                          code=..., outcome=outcome_dict_or_record, used=[UsedItem(...)]))
    found = graph.retrieve(RetrievalQuery.from_outcome(outcome, layer=...), k=8)
    state = graph.run_state(run_id)   # resume from the graph alone
"""

import logging as _logging

from kope.memory.graph import ExperienceGraph, RunState
from kope.memory.journal import Journal
from kope.memory.outcome import HardwareInfo, OutcomeRecord, parse_outcome
from kope.memory.ranking import DEFAULT_WEIGHTS, RankingWeights
from kope.memory.recorder import RecordResult, RunResult
from kope.memory.records import DecisionRecord, InsightRecord, RunRecord
from kope.memory.retrieval import Lineage, RetrievalQuery, RetrievalResult
from kope.memory.specs import Attempt, KnowledgeDoc, RunSpec, TaskSpec, UsedItem
from kope.memory.tuning import TuningData, TuningQuery, TuningRecord

__all__ = [
    "Attempt",
    "DEFAULT_WEIGHTS",
    "DecisionRecord",
    "ExperienceGraph",
    "HardwareInfo",
    "InsightRecord",
    "Journal",
    "KnowledgeDoc",
    "Lineage",
    "OutcomeRecord",
    "RankingWeights",
    "RecordResult",
    "RetrievalQuery",
    "RetrievalResult",
    "RunRecord",
    "RunResult",
    "RunSpec",
    "RunState",
    "TaskSpec",
    "TuningData",
    "TuningQuery",
    "TuningRecord",
    "UsedItem",
    "parse_outcome",
]

# The driver logs server notifications (e.g. "property key does not exist" on a
# fresh database) as warnings; without a handler Python would print them on
# stderr in the middle of CLI output. They stay visible with `kope -v`.
_logging.getLogger("neo4j.notifications").addHandler(_logging.NullHandler())
