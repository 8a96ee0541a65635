"""The compute templates' candidates are correct under the real harness (correctness only, fixed seeds).

* every template's default settings pass every operator it serves: on its representative cases in the
  test command, on every case with KOPE_FULL_CHECKS=1 (about 15 minutes more on 2 cores);
* every value of every knob passes an operator's representative cases (an awkward size and a
  non-float32 dtype; in the test command the dtype case for each template's first setting only): the knobs' non-default values are grouped into a few settings per template.

The full check of knob combinations is benchmarks/check_templates_compute.py.
"""

import os

import pytest

from harness.evaluate import EvalOptions, evaluate
from harness.suite import find_task
from harness.suite.kernel_templates import list_templates

FAMILIES = ("matmul", "convolution", "fused", "block")
TEMPLATES = [t for t in list_templates("cpu") if t.family in FAMILIES]
SEED = 20261130  # fixed inputs: the outcome does not depend on the draw

# Per operator: an awkward float32 case and a float64 or bfloat16 one.
REPRESENTATIVE = {
    "matmul": ["odd-511x1023x257", "f64-odd-300x701x499"],
    "batched_matmul": ["128x127x129x65", "16x255x257x129-f64"],
    "matvec": ["4097x4095", "4093x8191-bf16"],
    "matmul_transposed_a": ["1023x1025x1027", "511x2047x257-f64"],
    "tall_skinny_matmul": ["131071x127x33", "1048575x7x7-bf16"],
    "linear": ["257x1023x1025", "7x2049x2047-f64"],
    "conv2d": ["nopad-4x32->32-57x61-k3", "f64-4x16->16-63x61-k3s2"],
    "conv2d_strided": ["4x33x65-127x129-k5s3", "8x127x129-57-k3s2-bf16"],
    "conv1d": ["8x127x129-L2047-k3p0", "4x33x65-L8191-k5s3-f64"],
    "conv_transpose2d": ["2x33x17-63x65-k5s3", "2x32x16-95-k3s2-f64"],
    "depthwise_conv2d": ["2x1023x31x33-k3", "1x256x127x127-k5-bf16"],
    "max_pool2d": ["8x96x57x57-k3s2", "7x33x127x129-k2s2-bf16"],
    "avg_pool2d": ["16x96x57x57-k3s2", "7x33x127x129-k2s2-bf16"],
    "gemm_bias_relu": ["odd-257x1023->511", "f64-odd-177x1001->333"],
    "gemm_gelu_scale": ["257x1023x1025", "129x1023x4097-bf16"],
    "gemm_sigmoid_sum": ["257x1023x1025", "7x2049x2047-f64"],
    "matmul_softmax": ["16x257x255x64", "3x1000x1001x96-bf16"],
    "conv2d_bias_relu": ["4x33x65-127x129-k3", "2x31x17-65x63-k5-f64"],
    "bias_scale_tanh": ["16x97x67x67", "7x33x127x129-bf16"],
    "residual_layer_norm": ["4x1021x1023", "7x1000x1537-bf16"],
    "mlp_block": ["odd-10x65-d129-h515", "f64-odd-1x199-d200-h333"],
    "transformer_ffn": ["3x127x513x2051", "1x99x257x1031-f64"],
    "rmsnorm_swiglu": ["3x127x513x1367", "5x77x769x2053-bf16"],
    "sdpa_attention": ["3x5x333x333x80-causal", "2x4x255x257x96-f64"],
    "multi_head_attention": ["3x333x480h5-causal", "1x129x384h6-f64"],
    "transformer_layer": ["3x333x384h6", "1x129x320h5-f64"],
    "lstm_cell": ["33x1023x1025", "17x511x767-f64"],
    "gru_cell": ["512x257x255", "1x2047x2049-bf16"],
    "cnn_stem": ["2x3x64-225x301", "1x3x33-149x151-f64"],
    "residual_conv_block": ["16x33x31x31", "4x127x29x27-bf16"],
    "tiny_cnn": ["8x65x63-w24", "2x57x59-w16-f64"],
}


def knob_value_settings(template):
    """A few settings that together give every knob every one of its non-default values."""
    others = {k.name: [v for v in k.values if v != k.default] for k in template.knobs}
    count = max(len(v) for v in others.values())
    return [{name: values[min(i, len(values) - 1)] for name, values in others.items()} for i in range(count)]


DEFAULT_JOBS = [(t, op) for t in TEMPLATES for op in t.operators]
VALUE_JOBS = [(t, i, s) for t in TEMPLATES for i, s in enumerate(knob_value_settings(t))]


def evaluate_rendered(tmp_path, template, operator, settings, cases=None):
    path = tmp_path / f"{operator}.py"
    path.write_text(template.render(operator, settings))
    return evaluate(operator, path, EvalOptions(timing=False, seeds=1, seed=SEED, cases=cases))


def failure(outcome):
    bad = [f"{c.name}: {c.error}" for c in outcome.cases if not c.passed]
    return f"{outcome.error_kind}: {bad[:2] or outcome.error_excerpt}"


def test_every_covered_operator_has_representative_cases_of_its_task():
    for template in TEMPLATES:
        for operator in template.operators:
            names = {c.name for c in find_task(operator).cases}
            assert set(REPRESENTATIVE[operator]) <= names, operator


def test_the_knob_value_settings_cover_every_value_of_every_knob():
    for template in TEMPLATES:
        seen = {(name, value) for s in knob_value_settings(template) for name, value in s.items()}
        seen |= set(template.default_settings().items())
        assert seen == {(k.name, v) for k in template.knobs for v in k.values}, template.name


@pytest.mark.slow
@pytest.mark.parametrize("template, operator", DEFAULT_JOBS, ids=[f"{t.name}-{op}" for t, op in DEFAULT_JOBS])
def test_default_settings_pass_every_case(tmp_path, template, operator):
    full = os.environ.get("KOPE_FULL_CHECKS") == "1"
    cases = None if full else REPRESENTATIVE[operator]
    outcome = evaluate_rendered(tmp_path, template, operator, template.default_settings(), cases=cases)
    assert outcome.status.value == "correct", failure(outcome)
    assert outcome.cases_passed == outcome.cases_total == (len(find_task(operator).cases) if full else 2)


@pytest.mark.slow
@pytest.mark.parametrize("template, index, settings", VALUE_JOBS, ids=[f"{t.name}-{i}" for t, i, _ in VALUE_JOBS])
def test_every_knob_value_passes_representative_cases(tmp_path, template, index, settings):
    """The awkward float32 case for every setting; the float64/bfloat16 case too for a template's first setting
    (for every setting with KOPE_FULL_CHECKS=1: a bfloat16 reference on a CPU without native bf16 is slow)."""
    operator = template.operators[(index + 1) % len(template.operators)]
    full = os.environ.get("KOPE_FULL_CHECKS") == "1"
    cases = REPRESENTATIVE[operator] if full or index == 0 else REPRESENTATIVE[operator][:1]
    outcome = evaluate_rendered(tmp_path, template, operator, settings, cases=cases)
    assert outcome.status.value == "correct", f"{operator} {settings}: {failure(outcome)}"
    assert outcome.cases_passed == outcome.cases_total == len(cases)


@pytest.mark.slow
@pytest.mark.parametrize(
    "disable", [[], ["-mno-avx512f"], ["-mno-avx512f", "-mno-avx2", "-mno-fma"]], ids=["native", "no-avx512", "no-avx2"]
)
def test_an_avx512_setting_builds_and_computes_on_cpus_without_avx512(disable):
    """isa=avx512 falls back to AVX2 intrinsics, then to omp simd code, when the compiler target lacks them."""
    import re

    import torch

    from harness.cpu import compile_cpp
    from harness.suite.cpp_kit.prelude import FLAGS
    from harness.suite.kernel_templates import template_for

    source = template_for("matmul").render("matmul", {"isa": "avx512", "micro_kernel": "8x3", "pack_a": True})
    cpp = re.search(r'_SOURCE = r"""(.*?)"""', source, re.S).group(1)
    lib = compile_cpp(cpp, flags=FLAGS + disable)
    torch.manual_seed(0)
    for m, k, n, dtype in [(67, 301, 129, torch.float32), (1, 513, 77, torch.float32), (33, 65, 17, torch.float64)]:
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        c = torch.empty(m, n, dtype=dtype)
        kernel = lib.gemm_f32 if dtype == torch.float32 else lib.gemm_f64
        kernel(a, b, None, c, 1, m, n, k, 0, k, 1, 0, n, 1)
        torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)


def test_auto_micro_kernel_and_tiles_follow_the_isa_and_the_blis_rules_for_given_caches():
    """micro_kernel=auto is 14x2 with AVX-512, 6x2 with AVX2; tiles=auto: KC x NR of B in half of L1, MC x KC of
    A in half of L2, KC x NC of B in an eighth of L3 (rounded to the micro-kernel, clamped)."""
    from harness.cpu import compile_cpp
    from harness.hardware import cpu_fingerprint
    from harness.suite.cpp_kit import gemm as core
    from harness.suite.cpp_kit.prelude import FLAGS, PRELUDE, isa_define

    caches = {"l1d": 48 << 10, "l2": 1 << 20, "l3": 32 << 20}
    probe = 'extern "C" int64_t geo(int w) { const int64_t v[] = {MR, NV, Geo<float>::KC, Geo<float>::MC, Geo<float>::NC}; return v[w]; }\n'
    cpp = isa_define("avx512") + core.defines("auto", "auto", True, "grid", caches) + PRELUDE + core.GEMM + probe
    lib = compile_cpp(cpp, flags=FLAGS)
    isa = cpu_fingerprint().isa
    mr, nv, lanes = (14, 2, 16) if "avx512f" in isa else (6, 2, 8) if "avx2" in isa and "fma" in isa else (4, 2, 8)
    nr = nv * lanes
    kc = min(1024, max(64, caches["l1d"] // 2 // (nr * 4) // 8 * 8))
    mc = caches["l2"] // 2 // (kc * 4) // mr * mr
    nc = min(8192 // nr * nr, caches["l3"] // 8 // (kc * 4) // nr * nr)
    assert [lib.geo(i) for i in range(5)] == [mr, nv, kc, mc, nc]
