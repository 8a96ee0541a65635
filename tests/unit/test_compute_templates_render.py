"""The compute templates (matmul, convolution, fused, block families) load, cover their operators and render.

Evaluation of the rendered candidates is in tests/e2e/test_templates_compute.py; these checks only
render text, so they run in a second.
"""

import ast

import pytest

from harness.static_check import check_source
from harness.suite import find_task
from harness.suite.kernel_templates import list_templates, template_for

FAMILIES = ("matmul", "convolution", "fused", "block")
COVERED = {
    "matmul": {"matmul", "batched_matmul", "matvec", "matmul_transposed_a", "tall_skinny_matmul", "linear"},
    "convolution": {
        "conv2d",
        "conv2d_strided",
        "conv1d",
        "conv_transpose2d",
        "depthwise_conv2d",
        "max_pool2d",
        "avg_pool2d",
    },
    "fused": {
        "gemm_bias_relu",
        "gemm_gelu_scale",
        "gemm_sigmoid_sum",
        "conv2d_bias_relu",
        "bias_scale_tanh",
        "matmul_softmax",
        "residual_layer_norm",
    },
    "block": {
        "mlp_block",
        "transformer_ffn",
        "rmsnorm_swiglu",
        "sdpa_attention",
        "multi_head_attention",
        "transformer_layer",
        "lstm_cell",
        "gru_cell",
        # the composite pipeline template: blocks of several kernels, rendered from their traced structure
        "cnn_stem",
        "residual_conv_block",
        "tiny_cnn",
    },
}
TEMPLATES = [t for t in list_templates("cpu") if t.family in FAMILIES]


def every_knob_value(template):
    """(knob, value) for every value of every knob, with the other knobs at their defaults."""
    return [(knob.name, value) for knob in template.knobs for value in knob.values]


def test_the_compute_templates_cover_the_expected_operators_of_each_family():
    served = {family: set() for family in FAMILIES}
    for template in TEMPLATES:
        served[template.family] |= set(template.operators)
    assert served == COVERED


@pytest.mark.parametrize("family", FAMILIES)
def test_each_covered_operator_is_a_builtin_task_of_its_family(family):
    for operator in COVERED[family]:
        assert find_task(operator).family == family
        assert template_for(operator).family == family


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name)
def test_each_template_declares_three_to_six_knobs_with_docs(template):
    assert 3 <= len(template.knobs) <= 6
    for knob in template.knobs:
        assert len(knob.values) >= 2 and knob.default in knob.values
        assert len(knob.doc) > 20


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name)
def test_every_knob_value_renders_a_statically_clean_candidate_for_every_operator(template):
    for operator in template.operators:
        for name, value in every_knob_value(template):
            source = template.render(operator, {name: value})
            ast.parse(source)
            assert "class ModelNew" in source
            assert check_source(source) == [], f"{operator} {name}={value}"


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name)
def test_knob_values_change_the_rendered_source(template):
    operator = template.operators[0]
    default = template.render(operator)
    for name, value in every_knob_value(template):
        if value != template.knob(name).default:
            assert template.render(operator, {name: value}) != default, f"{name}={value} renders the default"


def test_the_rendered_source_names_its_settings():
    source = template_for("matmul").render("matmul", {"micro_kernel": "8x3", "isa": "avx512"})
    assert "#define KOPE_MR 8" in source and "#define KOPE_ISA 512" in source
    assert "micro_kernel=8x3" in source.split('"""')[1]


def test_auto_tiles_write_the_measured_cache_sizes_into_the_source():
    from harness.hardware import cache_sizes

    source = template_for("matmul").render("matmul", {"tiles": "auto"})
    caches = cache_sizes()
    assert "#define KOPE_TILES_AUTO 1" in source
    for level in ("l1d", "l2", "l3"):
        if caches.get(level):
            assert f"#define KOPE_{level.upper()} {caches[level]}" in source


def test_explicit_tiles_and_micro_kernels_are_written_as_given():
    source = template_for("matmul").render("matmul", {"tiles": "96x256x1024", "micro_kernel": "4x3"})
    assert "#define KOPE_TILES_AUTO 0" in source and "#define KOPE_MC 96" in source and "#define KOPE_KC 256" in source
    assert "#define KOPE_MR 4" in source and "#define KOPE_NV 3" in source
