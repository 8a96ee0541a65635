"""The cpu kernel templates of the elementwise, reduction and normalization families.

Fast checks: every template loads with 3-6 knobs, every built-in operator of the
three families has a template of its family, every combination of knob values
renders a candidate the static anti-cheat check accepts, and the AVX-512/AVX
code paths fall back to portable code when the CPU lacks the ISA.

Slow checks, through the real harness (isolated workers, timing off, one seed
per case): the default settings of every template pass every operator it
serves (its first, middle and last case; every case with KOPE_FULL_CHECKS=1); every value of every knob passes an operator's
representative cases (an awkward size and a non-float32 dtype).
``benchmarks/check_templates.py`` runs the exhaustive (pairwise or
all-combinations) version of the second check.
"""

import ast
import itertools
import os

import pytest

from harness.cpu import compile_cpp
from harness.evaluate import EvalOptions, evaluate
from harness.static_check import check_source
from harness.suite import find_task, list_tasks
from harness.suite.kernel_templates import list_templates, template_for

FAMILIES = ("elementwise", "reduction", "normalization")
TEMPLATES = {t.name: t for t in list_templates("cpu") if t.family in FAMILIES}
OPERATORS = sorted(t.operator for family in FAMILIES for t in list_tasks(family))

# template -> (operator, [an awkward-size case, a non-float32 case]) used for the knob-value check
REPRESENTATIVE = {
    "pointwise": ("silu", ["1023x7177", "2049x7165-bf16"]),
    "axis_reduce": ("mean_dim", ["127x257x509-d2", "7x1021x1023-d1-bf16"]),
    "row_logsumexp": ("logsumexp", ["1x4194305", "257x8191-f64"]),
    "prefix_scan": ("cumsum", ["7x600001", "1021x3079-f64"]),
    "row_softmax": ("log_softmax", ["1x4194305", "4097x1025-bf16"]),
    "row_norm": ("layer_norm", ["offset-32x64x2048", "f64-odd-10x77x2049"]),
    "channel_norm": ("group_norm", ["7x60x127x127-g15", "4x320x97x97-g32-bf16"]),
}


def value_cover(template):
    """Settings (besides the defaults) in which every value of every knob appears at least once."""
    width = max(len(k.values) for k in template.knobs)
    rows = []
    for r in range(1, width):
        rows.append({k.name: k.values[r % len(k.values)] for k in template.knobs})
    return rows


def _compile_call(source):
    """The C++ source and flags a rendered candidate passes to compile_cpp."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "compile_cpp":
            flags = next((ast.literal_eval(k.value) for k in node.keywords if k.arg == "flags"), [])
            return node.args[0].value, flags
    raise AssertionError("the candidate does not call compile_cpp")


def test_every_template_loads_with_three_to_six_documented_knobs():
    assert set(TEMPLATES) == set(REPRESENTATIVE)
    for template in TEMPLATES.values():
        assert 3 <= len(template.knobs) <= 6, template.name
        for knob in template.knobs:
            assert knob.values[0] == knob.default, f"{template.name}.{knob.name}: the default is not the first value"
            assert len(knob.values) >= 2 and knob.doc, f"{template.name}.{knob.name}"


def test_every_operator_of_the_three_families_has_a_template_of_its_family():
    assert len(OPERATORS) == 25
    for family in FAMILIES:
        for task in list_tasks(family):
            template = template_for(task.operator)
            assert template is not None, f"no cpu template serves {task.operator}"
            assert template.family == family, (
                f"{task.operator} is {family} but its template {template.name} is {template.family}"
            )


@pytest.mark.parametrize("name", sorted(REPRESENTATIVE))
def test_every_combination_renders_a_candidate_the_static_checks_accept(name):
    template = TEMPLATES[name]
    names = [k.name for k in template.knobs]
    for values in itertools.product(*[k.values for k in template.knobs]):
        settings = dict(zip(names, values))
        for op in template.operators:
            source = template.render(op, settings)
            assert check_source(source) == [], (op, settings)
            assert all(f"{k}={v}" in source for k, v in settings.items())  # the docstring names its settings


def test_templates_fall_back_cleanly_without_avx512_or_avx():
    # The only intrinsics are the streaming stores (AVX-512, else AVX, else memcpy); vector_width=512 is a
    # preference pragma guarded by __AVX512F__. Both must build for a CPU without the ISA.
    source, flags = _compile_call(TEMPLATES["pointwise"].render("relu", {"store": "streaming", "vector_width": 512}))
    assert flags == [] and "_mm512_stream_si512" in source and 'target("prefer-vector-width=512")' in source
    for disable in (["-mno-avx512f"], ["-mno-avx512f", "-mno-avx"]):
        library = compile_cpp(source, flags=disable)
        assert "relu_f32" in library.functions


@pytest.mark.slow
def test_streaming_stores_are_correct_when_compiled_without_avx512(tmp_path):
    source = TEMPLATES["pointwise"].render("add_scaled", {"store": "streaming", "vector_width": 512})
    without = source.replace('""")\n\n_KERNELS', '""", flags=["-mno-avx512f"])\n\n_KERNELS')
    assert without.count("-mno-avx512f") == 1
    path = tmp_path / "add_scaled_no_avx512.py"
    path.write_text(without)
    outcome = evaluate("add_scaled", path, EvalOptions(timing=False, seeds=1, cases=["1023x7177", "1x14680067-bf16"]))
    assert outcome.status.value == "correct", outcome.error_excerpt


@pytest.mark.slow
@pytest.mark.parametrize("operator", OPERATORS)
def test_default_settings_pass_every_case(operator, tmp_path):
    """Every case with KOPE_FULL_CHECKS=1; in the test command the first, middle and last case of the task."""
    template = template_for(operator)
    path = tmp_path / f"{operator}.py"
    path.write_text(template.render(operator))
    names = [c.name for c in find_task(operator).cases]
    full = os.environ.get("KOPE_FULL_CHECKS") == "1"
    cases = None if full else sorted({names[0], names[len(names) // 2], names[-1]}, key=names.index)
    outcome = evaluate(operator, path, EvalOptions(timing=False, seeds=1, cases=cases))
    assert outcome.status.value == "correct", f"{template.name} defaults on {operator}: {outcome.error_excerpt}"
    assert outcome.cases_passed == outcome.cases_total == (len(names) if full else len(cases))
    assert len(names) >= 8


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, row", [(n, i) for n in sorted(REPRESENTATIVE) for i in range(len(value_cover(TEMPLATES[n])))]
)
def test_every_knob_value_passes_representative_cases(name, row, tmp_path):
    template = TEMPLATES[name]
    operator, cases = REPRESENTATIVE[name]
    settings = value_cover(template)[row]
    path = tmp_path / f"{name}_{row}.py"
    path.write_text(template.render(operator, settings))
    outcome = evaluate(operator, path, EvalOptions(timing=False, seeds=1, cases=cases))
    assert outcome.status.value == "correct", f"{name} {settings} on {operator}: {outcome.error_excerpt}"
    assert outcome.cases_passed == len(cases)


def test_value_cover_uses_every_value_of_every_knob():
    for template in TEMPLATES.values():
        rows = [template.default_settings()] + value_cover(template)
        for knob in template.knobs:
            assert {r[knob.name] for r in rows} == set(knob.values), (template.name, knob.name)
