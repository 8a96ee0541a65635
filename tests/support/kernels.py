"""Candidate files for the relu task, for scripted LLM replies: right, wrong, slow, broken."""

FAST = '''import torch
import torch.nn as nn
from harness.cpu import compile_cpp

_lib = compile_cpp(r"""
#include <cstdint>
extern "C" void relu_f32(const float* x, float* y, int64_t n) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
""")


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.relu_f32(x, y, x.numel())
        return y
'''

# Correct, but burns time per element (serial, with a dependent chain the compiler cannot drop).
SLOW = FAST.replace(
    "    #pragma omp parallel for simd schedule(static)\n    for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.f ? x[i] : 0.f;",
    "    for (int64_t i = 0; i < n; ++i) {\n        volatile float v = x[i];\n"
    "        for (int k = 0; k < 40; ++k) v = v * 1.0f;\n        y[i] = v > 0.f ? (float)v : 0.f;\n    }",
)

WRONG = FAST.replace("x[i] > 0.f ? x[i] : 0.f", "x[i]")  # identity: negative values survive

BROKEN = FAST.replace("int64_t n) {", "int64_t n) { this is not C++;")


def reply(title: str, layer: str, code: str, evidence: str = "none") -> str:
    return (
        f"DECISION\ntitle: {title}\nlayer: {layer}\nrationale: scripted test reply.\nevidence: {evidence}\n"
        f"END DECISION\n\n```python\n{code}```\n"
    )
