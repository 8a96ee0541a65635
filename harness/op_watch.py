"""Every aten op a correctness trial's forward dispatches, on any thread, seen below torch's Python dispatch modes.

docs/harness-workers.md, "Reference calls below Python" (the dispatcher's op observer: what it sees, and not).
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch._C._profiler import ProfilerActivity, ProfilerConfig, ProfilerState, _ExperimentalConfig

from harness.guards import ALLOWED_ATEN

# taken when the harness is imported, before any candidate code ran (a later replacement changes nothing here)
_prepare = torch._C._autograd._prepare_profiler
_enable = torch._C._autograd._enable_profiler
_disable = torch._C._autograd._disable_profiler
_empty = torch.empty
_ACTIVITIES = {ProfilerActivity.CPU}

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


class OpWatch:
    """``with OpWatch() as watch:`` around the recorder's with-block; afterwards ``forbidden(recorded)``."""

    def __init__(self) -> None:
        self.ops: list[tuple[str, list]] = []  # the trees of aten ops seen: (name, children)
        self.problem: str | None = None

    def __enter__(self) -> OpWatch:
        config = ProfilerConfig(
            ProfilerState.KINETO, False, False, False, False, False, _ExperimentalConfig(profile_all_threads=True)
        )
        _quiet(lambda: (_prepare(config, _ACTIVITIES), _enable(config, _ACTIVITIES)))
        _empty(0)  # the first op the watch must see
        return self

    def __exit__(self, *exc: object) -> None:
        _empty(0)  # the last
        try:
            events = _quiet(_disable).events()
        except RuntimeError as err:
            self.problem = f"the dispatcher's profiler was switched off during forward ({err})"
            return
        self.ops = _trees(events)
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


def _trees(events: Any) -> list[tuple[str, list]]:
    """The profiler's aten ops as trees, nested by time on each thread (other ranges are transparent), the roots of
    every thread in the order they started."""
    spans = sorted(
        (e.start_ns(), -e.duration_ns(), e.start_thread_id(), e.name()) for e in events if e.name().startswith("aten::")
    )
    roots: list[tuple[int, tuple[str, list]]] = []
    open_by_thread: dict[int, list[tuple[int, list]]] = {}  # thread -> stack of (end, children) of open ops
    for start, minus_duration, thread, name in spans:
        stack = open_by_thread.setdefault(thread, [])
        while stack and stack[-1][0] <= start:
            stack.pop()
        node: tuple[str, list] = (name, [])
        if stack:
            stack[-1][1].append(node)
        else:
            roots.append((start, node))
        stack.append((start - minus_duration, node[1]))
    return [node for _, node in roots]


def _quiet(call: Any) -> Any:
    """``call()`` with this process's stderr sent into a pipe and dropped: the profiler's library logs every start and
    stop there (a pipe, not /dev/null: nothing is opened, so the sandbox and the audit hook have nothing to refuse)."""
    read, write = os.pipe()
    saved = os.dup(2)
    os.set_blocking(read, False)
    try:
        os.dup2(write, 2)
        try:
            return call()
        finally:
            os.dup2(saved, 2)
    finally:
        for fd in (saved, write):
            os.close(fd)
        try:
            while os.read(read, 65536):
                pass
        except BlockingIOError:
            pass
        os.close(read)


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
