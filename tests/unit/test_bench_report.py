"""The bench report from a hand-made results.json: the paper's table, the plots, regeneration."""

from __future__ import annotations

import pytest

from kope.bench.report import render_markdown, summary_table, with_metrics, write_report
from kope.bench.store import load_results
from kope.errors import UsageError
from tests.support import bench_results


def test_summary_table_has_configurations_as_rows_with_the_papers_columns():
    table = summary_table(with_metrics(bench_results.results())).splitlines()
    assert table[0] == (
        "| configuration | operators passed | cases passed | pass rate | L1 | L2 | L3 | L4 | geomean speedup | "
        "paired speedup vs no-memory | tokens | tokens / step |"
    )
    # active: relu best = step 1 (2.0, 1.8), softmax (1.1, 1.3), gemm_bias_relu has no attempt (3 failed cases)
    # geomean (2*1.8*1.1*1.3)^(1/4) = 1.506; paired on relu.a, softmax.a, softmax.b: (2/1.2 * 1.1/1 * 1.3/0.5)^(1/3) = 1.683
    assert (
        table[2] == "| active | 2/3 | 4/7 | 57.1% | 100.0% | 0.0% | - | - | 1.51x (n=4) | 1.68x (n=3) | 8,900 | 2,967 |"
    )
    # no-memory: relu 1 of 2 (1.2), softmax (1.0, 0.5), gemm_bias_relu missing; geomean 0.6^(1/3) = 0.843
    assert (
        table[3]
        == "| no-memory | 2/3 | 3/7 | 42.9% | 75.0% | 0.0% | - | - | 0.84x (n=3) | (baseline) | 5,850 | 2,925 |"
    )


def test_another_baseline_pairs_the_other_way_round():
    table = summary_table(with_metrics(bench_results.results(), "active")).splitlines()
    assert "paired speedup vs active" in table[0]
    assert "| (baseline) |" in table[2] and "0.59x (n=3)" in table[3]


def test_an_unknown_baseline_is_refused():
    with pytest.raises(UsageError, match="not a configuration"):
        with_metrics(bench_results.results(), "passive")


def test_stored_metrics_are_ignored_and_recomputed():
    data = bench_results.results()
    clean = render_markdown(with_metrics(data))
    data["metrics"] = {"active": {"pass_rate": 1.0}}
    assert render_markdown(with_metrics(data)) == clean


def test_the_markdown_says_what_is_missing_and_how_offline_tokens_are_counted():
    text = render_markdown(with_metrics(bench_results.results()))
    assert "**incomplete: 5 of 6 pairs finished**" in text
    assert "offline proposer calls no LLM" in text and "context tokens" in text
    assert "| gemm_bias_relu | elementwise | L2 | 3 | missing | missing |" in text
    assert "| relu | elementwise | L1 | 2 | 2/2 · 1.90x · step 1 | 1/2 · 1.20x · step 0 |" in text
    assert "`run-active-relu`" in text
    for plot in ("pass_rate", "speedup", "tokens_per_step", "memory_growth"):
        assert f"](plots/{plot}.png)" in text


def test_write_report_regenerates_byte_identical_files(tmp_path):
    bench_results.write(tmp_path / "a")
    bench_results.write(tmp_path / "b")
    first = write_report(tmp_path / "a", load_results(tmp_path / "a"))
    second = write_report(tmp_path / "b", load_results(tmp_path / "b"))
    assert [p.name for p in first] == [
        "summary.md",
        "pass_rate.png",
        "speedup.png",
        "tokens_per_step.png",
        "memory_growth.png",
    ]
    for a, b in zip(first, second):
        assert a.read_bytes() == b.read_bytes(), a.name
        assert a.stat().st_size > 0
    assert first[1].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_results_without_the_bench_schema_are_refused(tmp_path):
    (tmp_path / "results.json").write_text('{"schema": "other"}')
    with pytest.raises(UsageError, match="not a kope bench results file"):
        load_results(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no results.json"):
        load_results(tmp_path / "empty")


def test_the_summary_has_a_steps_to_best_table_for_later_operators_of_each_family():
    text = render_markdown(with_metrics(bench_results.results()))
    assert "## Steps to 90% of the best speedup" in text
    assert "| softmax | elementwise | 1.20x | 1 | - |" in text
    assert "| **mean** | | | 1.00 (1/1 reached) | 3.00 (0/1 reached) |" in text
    assert "| relu | elementwise |" not in text.split("## Steps to")[1].split("## Plots")[0]
