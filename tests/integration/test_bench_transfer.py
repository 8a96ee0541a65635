"""Simulated memory transfer on one machine: a relabelled export is foreign experience to retrieval."""

from __future__ import annotations

import io
import json

from kope.bench.transfer import relabel_export
from kope.memory import ExperienceGraph, RetrievalQuery
from kope.memory import synthetic as syn

HW = syn.hardware("cpu-here0001", "x86_64-avx512", "intel")


def _record(graph: ExperienceGraph) -> None:
    graph.start_run(syn.run_spec("softmax", run_id="run-src", hw=HW))
    graph.record_attempt(syn.attempt("run-src", 0, "softmax", speedup=1.4, hw=HW))
    graph.record_attempt(syn.attempt("run-src", 1, "softmax", parent="run-src:s0", status="compile_error", hw=HW))
    graph.finish_run("run-src")


def _tier(graph: ExperienceGraph) -> set[str]:
    query = RetrievalQuery.from_outcome(syn.outcome("layer_norm", hw=HW))
    return {lineage.relevance.hardware_tier for lineage in graph.retrieve(query, k=8).lineages}


def test_relabelled_export_imports_as_experience_from_other_hardware(graph_client, tmp_path):
    source = ExperienceGraph(graph_client, namespace="transfer-src")
    _record(source)
    assert _tier(source) == {"hardware"}
    exported = tmp_path / "here.jsonl"
    with open(exported, "w", encoding="utf-8") as handle:
        source.export_to(handle)

    relabelled = tmp_path / "other.jsonl"
    report = relabel_export(exported, relabelled, hw_class="aarch64-neon", vendor="arm")
    assert report["hardware"] == 1
    other = ExperienceGraph(graph_client, namespace="transfer-other")
    with open(relabelled, encoding="utf-8") as handle:
        other.import_from(handle, source=str(relabelled))

    assert _tier(other) == {"other"}
    run = other.run("run-src")
    assert (run.hw_class, run.vendor) == ("aarch64-neon", "arm") and run.hw_id.startswith("sim-")
    state = other.run_state("run-src")
    assert {d.hw_id for d in state.decisions} == {run.hw_id}
    assert [d.status for d in state.decisions] == ["correct", "compile_error"]
    buffer = io.StringIO()
    other.export_to(buffer)
    hardware = [json.loads(line) for line in buffer.getvalue().splitlines() if '"node":"Hardware"' in line]
    assert [h["id"] for h in hardware] == [run.hw_id]
