"""Pieces shared by the Triton templates: the knobs every one has and the candidate file around the kernels.

More on it: docs/templates.md, "Template notes", templates/triton/_triton.
"""

from __future__ import annotations

NUM_WARPS = {
    "name": "num_warps",
    "values": [4, 1, 8],
    "default": 4,
    "layer": "parallelization",
    "doc": "warps per program (threads = 32 x num_warps): more warps hide memory latency on big blocks",
}
NUM_STAGES = {
    "name": "num_stages",
    "values": [2, 3, 4],
    "default": 2,
    "layer": "scheduling",
    "doc": "software-pipelining depth of the K loop (shared-memory buffers prefetched ahead)",
}

# The compute dtype of a tensor's dtype: float64 stays, everything else is computed in float32.
COMPUTE = """
def _compute_dtype(dtype):
    return tl.float64 if dtype == torch.float64 else tl.float32
"""


def settings_line(settings: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items())


def candidate(template: str, operator: str, settings: dict, summary: str, kernels: str, model: str) -> str:
    """The candidate file: docstring (template, settings, what it does), imports, kernels, ModelNew."""
    return (
        f'"""{operator} in Triton, rendered from the kernel template triton/{template}.py '
        f'({settings_line(settings)}).\n\n{summary.strip()}\n"""\n\n'
        "import torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"
        f"{COMPUTE}\n{kernels.strip()}\n\n\n{model.strip()}\n"
    )
