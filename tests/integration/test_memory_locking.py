"""The ancestor lock, shown deterministically: a writer paused between reading its
lineage's scores and writing them must hold back a second writer to the same lineage."""

import threading

import pytest

from kope.db.client import Tx
from kope.memory import ExperienceGraph, synthetic
from kope.memory.recorder import write_attempts
from kope.memory.scoring import recompute_all


class PausingTx(Tx):
    """Stops after the statement that reads the children's scores until released."""

    def __init__(self, tx, catalog, paused: threading.Event, release: threading.Event) -> None:
        super().__init__(tx, catalog)
        self.paused, self.release = paused, release

    def run(self, name, **params):
        rows = super().run(name, **params)
        if name == "memory/attempt/children_scores":
            self.paused.set()
            assert self.release.wait(60)
        return rows


def test_a_second_writer_to_the_same_lineage_waits_and_no_score_update_is_lost(graph_client):
    graph = ExperienceGraph(graph_client, namespace="lock")
    graph.start_run(synthetic.run_spec("softmax", run_id="r"))
    graph.record_attempts(
        [
            synthetic.attempt("r", 0, "softmax"),
            synthetic.attempt("r", 1, "softmax", parent="r:s0", speedup=1.2),
            synthetic.attempt("r", 2, "softmax", parent="r:s0", speedup=1.3),
            synthetic.attempt("r", 3, "softmax", parent="r:s0", speedup=0.9),
        ]
    )
    # Writer A extends r:s1 (and links NEXT from r:s3); writer B extends r:s2 from another run.
    # The only node both lineages share is the root r:s0, whose d(v) both must update.
    graph.start_run(synthetic.run_spec("softmax", run_id="other"))
    paused, release = threading.Event(), threading.Event()
    errors = []

    def writer_a():
        try:
            with graph_client._driver.session(database=graph_client.database) as session:
                session.execute_write(
                    lambda tx: write_attempts(
                        PausingTx(tx, graph_client.catalog, paused, release),
                        "lock",
                        [synthetic.attempt("r", 4, "softmax", parent="r:s1", speedup=2.0)],
                    )
                )
        except Exception as exc:  # surfaced below
            errors.append(exc)

    def writer_b():
        try:
            graph.record_attempt(synthetic.attempt("other", 0, "softmax", parent="r:s2", speedup=2.5))
        except Exception as exc:
            errors.append(exc)

    a = threading.Thread(target=writer_a)
    a.start()
    assert paused.wait(60)
    b = threading.Thread(target=writer_b)
    b.start()
    b.join(3.0)
    blocked = b.is_alive()
    release.set()
    a.join(60)
    b.join(60)
    assert not errors, errors
    assert blocked, "the second writer finished while the first held the lineage: the ancestor lock is missing"
    decisions = graph.run_state("r").decisions + graph.run_state("other").decisions
    reference = recompute_all({d.id: (d.r, d.parent_id) for d in decisions})
    assert {d.id: d.d for d in decisions} == pytest.approx(reference, rel=1e-12)
