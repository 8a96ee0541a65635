"""Effect insights as a pure function: controlled comparisons -> estimates with 95% intervals."""

import json
import math

import pytest
from scipy.stats import t as student_t

from kope.memory.effects import TemplateKnobs, build_effects, estimate

KNOBS = TemplateKnobs(
    values={"math": ("libm", "poly"), "unroll": (1, 2, 4)},
    defaults={"math": "libm", "unroll": 1},
    operators={"math": ("elu", "gelu"), "unroll": None},
)


def knobs(template, target):
    return KNOBS if template == "pointwise" else None


def row(id, operator, settings, a, hw="hw-a", sig="sig", shape_class="float32:2^22", template="pointwise"):
    return {
        "id": id,
        "family": "elementwise",
        "hw_class": "x86_64-avx512",
        "hw_id": hw,
        "operator": operator,
        "template": template,
        "shape_sig": sig,
        "shape_class": shape_class,
        "params_json": json.dumps({"template": template, "settings": settings}),
        "a": a,
        "outcome": f"ns/{id}",
    }


LIBM = {"math": "libm", "unroll": 1}
POLY = {"math": "poly", "unroll": 1}


def test_one_knob_comparisons_become_an_effect_with_its_t_interval():
    rows = [
        row("a0", "elu", LIBM, 1.0),
        row("a1", "elu", POLY, 4.0),
        row("b0", "elu", LIBM, 1.2, hw="hw-b"),
        row("b1", "elu", POLY, 6.0, hw="hw-b"),
        row("c0", "gelu", LIBM, 1.0),
        row("c1", "gelu", POLY, 8.0),
    ]
    (effect,) = build_effects("ns", rows, knobs)
    props = effect["props"]
    logs = [math.log(4.0), math.log(5.0), math.log(8.0)]
    mean, sd = sum(logs) / 3, (sum((x - sum(logs) / 3) ** 2 for x in logs) / 2) ** 0.5
    half = student_t.ppf(0.975, 2) * sd / math.sqrt(3)
    assert props["support"] == 3 and props["knob"] == "math" and props["value"] == "poly"
    assert props["baseline"] == "libm" and props["confidence"] == 1.0
    assert props["effect"] == pytest.approx(math.exp(mean), rel=1e-5)
    assert props["low"] == pytest.approx(math.exp(mean - half), rel=1e-5)
    assert props["high"] == pytest.approx(math.exp(mean + half), rel=1e-5)
    assert props["id"] == "effect:elementwise:x86_64-avx512:float32:2_22:pointwise.math=poly-vs-libm"
    assert "math=poly vs math=libm" in props["text"] and "(n=3, 95% interval" in props["text"]
    assert "elementwise (elu, gelu) at float32:2^22" in props["text"]
    assert effect["outcomes"] == sorted(f"ns/{r['id']}" for r in rows)


def test_a_knob_that_does_not_matter_for_the_operator_gives_no_comparison():
    rows = [row("r0", "relu", LIBM, 1.0), row("r1", "relu", POLY, 1.0), row("s0", "relu", LIBM, 1.0, hw="hw-b")]
    rows += [row("s1", "relu", POLY, 1.0, hw="hw-b")]
    assert build_effects("ns", rows, knobs) == []


def test_attempts_differing_in_two_knobs_or_in_cases_are_not_compared():
    rows = [
        row("a0", "elu", LIBM, 1.0),
        row("a1", "elu", {"math": "poly", "unroll": 4}, 5.0),  # two knobs differ
        row("b0", "elu", LIBM, 1.0, sig="other"),
        row("b1", "elu", POLY, 5.0, sig="another"),  # other cases
    ]
    assert build_effects("ns", rows, knobs) == []


def test_one_comparison_is_not_enough_and_repeated_settings_count_once():
    rows = [row("a0", "elu", LIBM, 1.0), row("a1", "elu", POLY, 4.0), row("a2", "elu", POLY, 4.0)]
    assert build_effects("ns", rows, knobs) == []


def test_the_value_is_oriented_against_the_default_and_slower_effects_say_so():
    rows = [
        row("a0", "elu", {"math": "libm", "unroll": 4}, 0.5),
        row("a1", "elu", LIBM, 1.0),
        row("b0", "elu", {"math": "libm", "unroll": 4}, 0.4, hw="hw-b"),
        row("b1", "elu", LIBM, 1.0, hw="hw-b"),
        row("c0", "elu", {"math": "libm", "unroll": 4}, 0.45, hw="hw-c"),
        row("c1", "elu", LIBM, 1.0, hw="hw-c"),
    ]
    (effect,) = build_effects("ns", rows, knobs)
    assert effect["props"]["value"] == "4" and effect["props"]["baseline"] == "1"
    assert effect["props"]["high"] < 1 and "slower" in effect["props"]["text"]


def test_estimate_of_identical_observations_has_a_zero_width_interval():
    assert estimate([math.log(2.0)] * 3) == pytest.approx((2.0, 2.0, 2.0))
