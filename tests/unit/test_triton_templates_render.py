"""The Triton templates (``harness/suite/templates/triton``) load, serve built-in operators and render.

Running the rendered candidates is in tests/e2e/test_templates_triton.py; these checks only render text.
"""

import ast

import pytest

from harness.static_check import check_source
from harness.suite import find_task
from harness.suite.kernel_templates import list_templates, template_for

TEMPLATES = list_templates("triton")
COVERED = {
    "elementwise": {"relu", "leaky_relu", "clamp", "hardswish", "add_scaled", "gelu", "sigmoid", "silu", "tanh", "elu"},
    "reduction": {"sum_dim", "mean_dim", "max_dim"},
    "normalization": {"softmax", "log_softmax", "layer_norm", "rms_norm"},
    "matmul": {"matmul", "batched_matmul", "matmul_transposed_a", "linear"},
    "fused": {"gemm_bias_relu", "gemm_gelu_scale"},
}


def test_the_triton_templates_cover_elementwise_reductions_norms_and_matmuls_with_epilogues():
    served = {}
    for template in TEMPLATES:
        assert template.target == "triton"
        served.setdefault(template.family, set()).update(template.operators)
    assert served == COVERED


def test_each_served_operator_is_a_builtin_task_of_the_templates_family():
    for template in TEMPLATES:
        for operator in template.operators:
            assert find_task(operator).family == template.family
            assert template_for(operator, "triton") is template


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name)
def test_each_template_has_block_size_and_warp_knobs_with_docs(template):
    names = {k.name for k in template.knobs}
    assert "num_warps" in names and any(n.startswith("BLOCK") or n == "tiles" for n in names)
    for knob in template.knobs:
        assert len(knob.values) >= 2 and len(knob.doc) > 20


def test_the_matmul_templates_expose_pipelining_stages():
    for operator in ("matmul", "gemm_bias_relu"):
        assert template_for(operator, "triton").knob("num_stages").values == (2, 3, 4)


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name)
def test_every_knob_value_renders_a_statically_clean_triton_candidate(template):
    for operator in template.operators:
        for knob in template.knobs:
            for value in knob.values:
                source = template.render(operator, {knob.name: value})
                ast.parse(source)
                assert "@triton.jit" in source and "class ModelNew" in source
                assert check_source(source) == [], f"{operator} {knob.name}={value}"
                assert f"{knob.name}={value}" in source.split('"""')[1]


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda t: t.name)
def test_knob_values_change_the_rendered_kernel_or_launch(template):
    operator = template.operators[0]
    default = template.render(operator).split('"""', 2)[2]  # the code, without the docstring
    for knob in template.knobs:
        for value in knob.values:
            if value != knob.default:
                assert template.render(operator, {knob.name: value}).split('"""', 2)[2] != default, knob.name


def test_the_offline_proposer_proposes_a_triton_template_for_the_triton_target():
    from types import SimpleNamespace as NS

    from kope.agent.offline import OfflineProposer

    request = NS(
        task=NS(operator="gemm_bias_relu", cases=()),
        target="triton",
        step=0,
        backtracked=False,
        parent=None,
        history=[],
        retrieval=None,
        context=NS(items=[]),
        hardware={"id": "test-gpu", "class": "sm90", "vendor": "nvidia"},  # no records: only the initial design
        cases=(),
        tuning=None,
        allowed=None,
    )
    proposal = OfflineProposer().propose(request)
    template = template_for("gemm_bias_relu", "triton")
    params = proposal.params
    assert (params["template"], params["settings"]) == ("gemm_epilogue", template.default_settings())
    assert params["tuner"]["basis"] == "initial design"
    assert "@triton.jit" in proposal.code and "class ModelNew" in proposal.code
