"""The candidate recipe of each target: how to write ``ModelNew`` there, its calling convention, an example.

It is a hot-tier section (``hot:recipe``), so every prompt carries it whatever the
budget: without it a model sees the reference and the rules but not how a kernel is
built and called on this harness (``harness.cpu.compile_cpp``'s pointer convention on
``cpu``; the launch and the interpreter on ``triton``; ``load_inline`` on ``cuda``). The
knowledge documents (cold tier) go deeper and may be dropped by the budget.
"""

from __future__ import annotations

_CONTRACT = (
    "A candidate is one Python file defining `class ModelNew(nn.Module)`. Its constructor takes the same "
    "arguments as the reference's `Model` (it is called with `get_init_inputs()`); create the parameters and "
    "buffers under the same names and shapes (copying the reference's `__init__` is the simplest way): the harness "
    "copies the reference's values in by name. `forward` takes `get_inputs()` and returns outputs of the reference's "
    "shapes and dtypes, computed by your kernels: torch compute in `forward` (`torch.matmul`, `F.softmax`, "
    "`x.sum()`, `@`, calling a torch module) is rejected; allocation, views and copies (`torch.empty`, "
    "`.contiguous()`, `.view()`, `.transpose()`) are allowed."
)

CPU = (
    _CONTRACT
    + """
Build C/C++ with `harness.cpu.compile_cpp(source, flags=())`: compiled once at import (cached by source hash; \
-O3 -march=native -fopenmp -shared), it returns an object whose attributes are the source's `extern "C"` functions. \
Calling convention: a pointer parameter takes a contiguous CPU tensor of the matching dtype (`float*` float32, \
`double*` float64, `uint16_t*` bfloat16/float16, `int64_t*` int64, `void*` any), a scalar parameter a Python \
number; functions return void and write into tensors allocated in Python. Do not change the thread count.
```python
import torch
import torch.nn as nn
from harness.cpu import compile_cpp

_lib = compile_cpp(r'''
#include <cstdint>
extern "C" void scale_f32(const float* x, float* y, int64_t n, double s) {
    #pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * float(s);
}
''')


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _lib.scale_f32(x, y, x.numel(), self.scale)
        return y
```"""
)

TRITON = (
    _CONTRACT
    + """
Write `@triton.jit` kernels and launch them from `forward` with a grid: `kernel[grid](x, y, n, BLOCK=1024)` \
(tensors are passed as pointers; `tl.program_id`, `tl.arange`, masked `tl.load`/`tl.store`). Without a GPU the \
harness runs Triton's interpreter on CPU tensors (correctness only; timings are not valid there).
```python
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale(x_ptr, y_ptr, n, s, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * s, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _scale[(triton.cdiv(n, 1024),)](x, y, n, self.scale, BLOCK=1024)
        return y
```"""
)

CUDA = (
    _CONTRACT
    + """
Write CUDA C++ and build it with `torch.utils.cpp_extension.load_inline(name=..., cpp_sources=..., \
cuda_sources=..., functions=[...])` at import; the exposed function takes and returns `torch::Tensor`s and \
launches your kernel (check bounds; the harness times with CUDA events).
```python
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_cuda = r'''
__global__ void scale_kernel(const float* x, float* y, long n, float s) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * s;
}
torch::Tensor scale(torch::Tensor x, double s) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    scale_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n, (float)s);
    return y;
}
'''
_ext = load_inline(name="kope_scale", cpp_sources="torch::Tensor scale(torch::Tensor x, double s);",
                   cuda_sources=_cuda, functions=["scale"])


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return _ext.scale(x.contiguous(), self.scale)
```"""
)

RECIPES = {"cpu": CPU, "triton": TRITON, "cuda": CUDA}


def recipe(target: str) -> str:
    """The ``hot:recipe`` section text for ``target`` (a target without one gets the contract alone)."""
    return f"## Candidate recipe ({target})\n" + RECIPES.get(target, _CONTRACT)
