"""What a worker may use, and how a worker that did not answer is reported (``WorkerError`` and its kinds).

The leaf of worker management: ``harness.zygote_client``, ``harness.worker_process`` and
``harness.worker_pool`` all raise these.
"""

from __future__ import annotations

from dataclasses import dataclass

OUTPUT_KEEP = 4000
BOOT_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 8 << 30  # resident set (and address space above the torch baseline on CPU)
    file_bytes: int = 256 << 20  # largest file the worker may write (stdout/stderr, build outputs)
    max_message_bytes: int = 8 << 30  # largest reply the parent accepts


class WorkerError(Exception):
    """Base for a worker that did not answer."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


class WorkerDied(WorkerError):
    def __init__(self, message: str, output: str, kind: str) -> None:
        super().__init__(message, output)
        self.kind = kind  # e.g. runtime_error:SIGSEGV, runtime_error:exit_code_3, runtime_error:out_of_memory


class WorkerTimeout(WorkerError):
    pass
