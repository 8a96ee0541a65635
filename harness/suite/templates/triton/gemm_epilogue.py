"""GEMM with a fused epilogue in Triton: gemm_bias_relu and gemm_gelu_scale.

``y = epilogue(x @ W.T + bias)`` on the tiled kernel of ``_matmul.py``: the
bias, ReLU or exact GELU and the scale are applied to the accumulator tile in
registers before its single store, so the GEMM's output never makes a second
trip through memory. Knobs as for the matmul template.
"""

from __future__ import annotations

from harness.suite.templates.triton import _matmul
from harness.suite.templates.triton._triton import NUM_STAGES, NUM_WARPS, candidate

FAMILY = "fused"
TARGET = "triton"
OPERATORS = ["gemm_bias_relu", "gemm_gelu_scale"]
KNOBS = [_matmul.TILES, _matmul.GROUP_M, NUM_WARPS, NUM_STAGES]

_FORWARD = """
    def forward(self, x):
        x = x.contiguous()
        w = {weight}.detach().contiguous()   # (out, in): B[k, j] = w[j * in + k]
        bias = {bias}.detach().contiguous()
        (m, k), n = x.shape, w.shape[0]
        y = torch.empty(m, n, dtype=x.dtype, device=x.device)
        _launch(x, w, bias, y, 1, m, n, k, (0, k, 1), (0, 1, k), (0, n, 1), {epilogue}{scale})
        return y
"""
MODELS = {
    "gemm_bias_relu": """
class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, dtype):
        super().__init__()
        # The reference's parameters, same names.
        dtype = getattr(torch, dtype)
        self.gemm = nn.Linear(in_features, out_features, bias=False, dtype=dtype)
        self.bias = nn.Parameter(torch.randn(out_features, dtype=dtype))
"""
    + _FORWARD.format(weight="self.gemm.weight", bias="self.bias", epilogue=2, scale=""),
    "gemm_gelu_scale": """
class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale, dtype):
        super().__init__()
        # The reference's module, so the harness copies its parameters in by name.
        self.fc = nn.Linear(in_features, out_features).to(getattr(torch, dtype))
        self.scale = scale
"""
    + _FORWARD.format(weight="self.fc.weight", bias="self.fc.bias", epilogue=3, scale=", self.scale"),
}


def render(operator: str, settings: dict) -> str:
    what = "relu(x @ W.T + bias)" if operator == "gemm_bias_relu" else "gelu(x @ W.T + bias) * scale"
    summary = (
        f"{what} with the epilogue on the accumulator tile before its one store: {settings['tiles']} tiles, "
        f"GROUP_M={settings['GROUP_M']}, {settings['num_warps']} warps, {settings['num_stages']} stages."
    )
    kernels = _matmul.settings_code(settings) + _matmul.KERNEL
    return candidate("gemm_epilogue", operator, settings, summary, kernels, MODELS[operator])
