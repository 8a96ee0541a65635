"""KOPE's shared vocabulary: families, optimization layers, outcome statuses and targets.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

from enum import StrEnum

FAMILIES: tuple[str, ...] = ("elementwise", "reduction", "normalization", "matmul", "convolution", "fused", "block")
UNKNOWN_FAMILY = "unknown"

LAYERS: tuple[str, ...] = (
    "parallelization",
    "tiling",
    "vectorization",
    "memory_layout",
    "fusion",
    "algorithm",
    "instruction",
    "unrolling",
    "scheduling",
    "other",
)


class Status(StrEnum):
    CORRECT = "correct"
    INCORRECT = "incorrect"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    TIMEOUT = "timeout"
    CHEAT_DETECTED = "cheat_detected"
    FORMAT_ERROR = "format_error"


STATUSES: tuple[str, ...] = tuple(s.value for s in Status)

TARGETS: tuple[str, ...] = ("cpu", "triton", "cuda")

# Evaluations that did not happen because of the evaluation infrastructure (a worker unreachable, killed
# or quarantined, a cluster fault), never because of the candidate: such an evaluation is retried
# elsewhere or reported as an error, and never recorded as an outcome (so these are not statuses).
INFRASTRUCTURE_KINDS: tuple[str, ...] = (
    "infrastructure:unreachable",  # no connection to the worker
    "infrastructure:worker_lost",  # the worker (or its evaluator process) died during the evaluation
    "infrastructure:quarantined",  # the worker's device hit a sticky error and is out of service
    "infrastructure:busy",  # the worker's queue is full, or it is shutting down
    "infrastructure:timeout",  # no answer within the evaluator's timeout
    "infrastructure:server_error",  # any other failure of the worker or the cluster
)
