"""The write-ahead log and the Markdown journal (no database)."""

import multiprocessing
from pathlib import Path

from kope.memory import synthetic
from kope.memory.journal import Journal, JournalEntry
from kope.memory.markdown import attempt_block


def entry(key, ts, op="softmax"):
    return JournalEntry("attempt", key, op, {"k": key}, ts)


def test_entries_come_back_in_journal_order_across_files(tmp_path):
    journal = Journal(tmp_path, "ns")
    journal.append([entry("b", 2), entry("x", 3, op="relu")])
    journal.append([entry("a", 1)])
    scan = journal.scan()
    assert [e.key for e in scan.entries] == ["a", "b", "x"] and scan.problems == [] and scan.files == 2
    assert [e.key for e in journal.scan("relu").entries] == ["x"]


def test_a_torn_last_line_is_reported_and_the_next_append_starts_a_fresh_line(tmp_path):
    journal = Journal(tmp_path, "ns")
    journal.append([entry("a", 1)])
    with open(journal.wal_file("softmax"), "ab") as handle:
        handle.write(b'{"v": 1, "kind": "attempt", "key": "torn"')
    scan = journal.scan()
    assert [e.key for e in scan.entries] == ["a"]
    assert scan.problems == ["softmax.jsonl:2: torn last line (the write was interrupted; never acknowledged)"]
    journal.append([entry("b", 2)])
    scan = journal.scan()
    assert [e.key for e in scan.entries] == ["a", "b"] and len(scan.problems) == 1


def _writer(root: str, worker: int) -> None:
    journal = Journal(Path(root), "ns")
    for i in range(100):
        journal.append([JournalEntry("attempt", f"w{worker}-{i}", "softmax", {"pad": "x" * 5000}, i)])


def test_concurrent_appends_from_processes_never_interleave(tmp_path):
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), w)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    scan = Journal(tmp_path, "ns").scan()
    assert scan.problems == [] and len({e.key for e in scan.entries}) == 400


def test_markdown_block_says_strategy_change_status_measurements_and_interpretation():
    child = synthetic.attempt("r", 1, "softmax", parent="r:s0", speedup=1.2, title="unroll by 4")
    text = attempt_block(child, parent_a=1.0, parent_known=True)
    for heading in (
        "**Strategy** (vectorization): unroll by 4",
        "**Change**: from `r:s0`",
        "**Status**: correct, 4/4",
        "**Measurements**: speedup 1.200x",
        "**Interpretation**: correct, 1.200x the reference; r = 1.200 vs parent -> effective",
    ):
        assert heading in text
    failed = synthetic.attempt("r", 2, "softmax", parent="r:s0", status="compile_error")
    assert "not usable (compile_error): a = 0, r = 0, label negative" in attempt_block(failed, 1.0, True)
    assert "computed when the graph is written" in attempt_block(child, None, parent_known=False)
