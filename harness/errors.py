"""The harness's own errors: problems with the *inputs* of an evaluation.

docs/harness.md, "Module notes".
"""

from __future__ import annotations


class HarnessError(Exception):
    """Base class: a one-line message meant for a person."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class TaskFormatError(HarnessError):
    """A task file is not a valid (KernelBench-compatible) task."""


class SandboxUnavailableError(HarnessError):
    """The OS sandbox cannot be set up here and the user did not opt out of it (candidates, task files)."""


class TaskNotFoundError(HarnessError):
    """No task file at that path and no built-in task of that name."""


class ReferenceFailedError(HarnessError):
    """The task's own reference (Model / get_inputs / get_init_inputs) failed at run time."""


class CandidateNotFoundError(HarnessError):
    """The candidate file does not exist or cannot be read."""


class TargetUnavailableError(HarnessError):
    """The target is unknown, or this machine cannot run it (e.g. cuda without a GPU)."""


class OptionsError(HarnessError):
    """Invalid evaluation options (a case selection that matches nothing, a negative budget, ...)."""


class CompileError(Exception):
    """Raised inside a candidate's process when its kernel does not compile.

    Not a ``HarnessError``: the harness turns it into a ``compile_error`` (or,
    with ``timed_out``, a ``timeout:compile``) outcome; ``cheat`` names the anti-cheat check a refused
    request fired (``compiler_escape``: a compiler flag that runs a program of the candidate's choosing).
    """

    def __init__(self, message: str, *, timed_out: bool = False, cheat: str | None = None) -> None:
        super().__init__(message)
        self.timed_out = timed_out
        self.cheat = cheat
