"""Insight distillation as a pure function (the graph part is in tests/integration)."""

from kope.memory.insights import MIN_SUPPORT, build_insights


def failures(n, kind="compile_error", hw_class="x86_64-avx2"):
    return {
        "family": "normalization",
        "hw_class": hw_class,
        "error_kind": kind,
        "outcomes": [f"ns/o{i}" for i in range(n)],
        "layers": ["vectorization"] * n,
        "operators": ["softmax"],
        "hardware": ["hw-1"],
        "latest_excerpt": "\nerror: unknown type name '__m512'\n  at kernel.cpp:3",
    }


TOTALS = [{"family": "normalization", "hw_class": "x86_64-avx2", "layer": "vectorization", "attempts": 10}]


def test_repeated_failures_become_a_rule_with_support_and_confidence():
    rows = build_insights("ns", [failures(4)], [], TOTALS)
    assert len(rows) == 1
    props = rows[0]["props"]
    assert props["id"] == "rule:normalization:x86_64-avx2:compile_error"
    assert props["support"] == 4 and props["confidence"] == 0.4
    assert "failed with compile_error in 4 of 10 attempts (40%)" in props["text"]
    assert "Latest error: error: unknown type name '__m512'" in props["text"]
    assert rows[0]["outcomes"] == [f"ns/o{i}" for i in range(4)]


def test_a_single_failure_is_not_a_rule():
    assert build_insights("ns", [failures(MIN_SUPPORT - 1)], [], TOTALS) == []


def test_distillation_is_deterministic():
    eff = [
        {
            "family": "normalization",
            "hw_class": "x86_64-avx2",
            "layer": "vectorization",
            "outcomes": ["ns/a", "ns/b"],
            "ratios": [1.4, 1.1],
            "titles": ["8-wide loads", "unroll"],
            "operators": ["softmax"],
            "hardware": ["hw-1"],
        }
    ]
    first = build_insights("ns", [failures(3)], eff, TOTALS)
    assert first == build_insights("ns", [failures(3)], eff, TOTALS)
    pattern = next(r for r in first if r["props"]["kind"] == "pattern")
    assert "effective 2 of 10 times (20%), median step ratio 1.25" in pattern["props"]["text"]
