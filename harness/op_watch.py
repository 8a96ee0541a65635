"""Every aten op a correctness trial's forward dispatches on its thread, seen below torch's Python dispatch modes.

``harness.guards.AtenRecorder`` is a ``TorchDispatchMode``: Python-level tricks take it off the op's path
(``torch.utils._python_dispatch._disable_current_modes``, ``torch._C._DisableTorchDispatch``), and the reference
op called that way was caught only by sampling the timed calls (``harness.native_probe``: not with timing off, and
only when enough units were measured). ``OpWatch`` observes the dispatcher itself: torch's legacy CPU profiler
registers a RecordFunction callback that every call through the dispatcher runs, whatever the Python mode stack
holds (a few us to start and stop; the Kineto profiler took ~0.9 s of CPU to start the first time in a process).
The ops it saw are judged like the recorder's: an op outside ``ALLOWED_ATEN`` that no allowed op called is the
reference's work (``reference_call``) -- unless the recorder saw that op too, in which case the recorder's own
verdict stands. An empty ``aten::empty`` before and after forward, issued by the harness, must be the first and
the last ops seen: a forward that switched the profiler or RecordFunction off (``_enable_record_function(False)``,
``_disable_profiler_legacy``) or started a profiler of its own loses one (``monkey_patch``).

What it does not see: ops on other threads (RecordFunction callbacks of the legacy profiler are per thread: the
native thread checks and the native probe cover those), native code that calls an op's kernel without the
dispatcher, and a forward that switches RecordFunction off and on again around the op (a call to
``torch._C._autograd._enable_record_function``; the static checks refuse ``torch._C``). docs/harness-workers.md,
"Reference calls below Python".
"""

from __future__ import annotations

from typing import Any

import torch
from torch._C._profiler import ProfilerConfig, ProfilerState, _ExperimentalConfig

from harness.guards import ALLOWED_ATEN

# taken when the harness is imported, before any candidate code ran (a later replacement changes nothing here)
_enable = torch._C._autograd._enable_profiler_legacy
_disable = torch._C._autograd._disable_profiler_legacy
_enabled = torch._C._autograd._profiler_enabled
_empty = torch.empty

# ops that compute nothing, which torch's Python bindings call in C++ without passing the dispatch modes the recorder
# sits in (``tensor.tolist()`` resolves the conjugate and negative bits: ``resolve_conj``, ``resolve_neg``), or that
# only read metadata
METADATA_ATEN = frozenset(
    {
        "resolve_conj",
        "resolve_neg",
        "conj",
        "_conj",
        "_neg_view",
        "lift",
        "result_type",
        "can_cast",
        "promote_types",
        "is_nonzero",
        "item",
        "size",
        "stride",
        "numel",
        "dim",
        "is_complex",
        "is_floating_point",
        "is_conj",
        "is_neg",
        "_is_zerotensor",
    }
)
_CANARY = "aten::empty"


class OpWatchTampered(Exception):
    """The watch was switched off or replaced during forward."""


class OpWatch:
    """``with OpWatch() as watch:`` around the recorder's with-block; afterwards ``forbidden(recorded)``."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, list]] = []  # the trees of aten ops seen: (name, children)
        self.problem: str | None = None

    def __enter__(self) -> OpWatch:
        _enable(ProfilerConfig(ProfilerState.CPU, False, False, False, False, False, _ExperimentalConfig()))
        _empty(0)  # the first op the watch must see
        return self

    def __exit__(self, *exc: object) -> None:
        _empty(0)  # the last
        if not _enabled():
            self.problem = "the dispatcher's profiler was switched off during forward"
            return
        try:
            records = _disable()
        except RuntimeError as err:
            self.problem = f"the dispatcher's profiler could not be read after forward ({err})"
            return
        self.ops = _trees(records)
        if len(self.ops) < 2 or self.ops[0][0] != _CANARY or self.ops[-1][0] != _CANARY:
            self.problem = (
                "the dispatcher's op observer (RecordFunction) missed one of the harness's own ops around forward: it "
                "was switched off, restarted or replaced during forward"
            )
            return
        self.ops = self.ops[1:-1]

    def forbidden(self, recorded: dict[str, int]) -> dict[str, int]:
        """Ops forward computed with, seen here and not by the dispatch-mode recorder (its ``counts``): the
        compute ops (no aten op below them) outside the allow-list that no allowed op called."""
        found: dict[str, int] = {}
        for node in self.ops:
            _judge(node, found)
        return {name: n for name, n in found.items() if name not in recorded}


def _trees(records: Any) -> list[tuple[str, list]]:
    """The legacy profiler's push/pop records of this thread as trees of aten ops (other ranges are transparent)."""
    roots: list[tuple[str, list]] = []
    for thread in records:
        stack: list[list | None] = []  # per open range: the children list of its aten node, None for another range
        for event in thread:
            kind = event.kind()
            if kind == "push":
                name = event.name()
                into = next((s for s in reversed(stack) if s is not None), roots)
                if name.startswith("aten::"):
                    node: tuple[str, list] = (name, [])
                    into.append(node)
                    stack.append(node[1])
                else:
                    stack.append(None)
            elif kind == "pop" and stack:
                stack.pop()
    return roots


def _judge(node: tuple[str, list], found: dict[str, int]) -> None:
    name, children = node
    short = name.removeprefix("aten::")
    if short in ALLOWED_ATEN or short in METADATA_ATEN:
        return  # what an allowed op calls is its own business
    if not children:
        found[short] = found.get(short, 0) + 1
        return
    for child in children:  # a composite op: judged by what it decomposed into
        _judge(child, found)
