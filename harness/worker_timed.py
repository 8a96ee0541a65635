"""A worker's side of a timed unit: ``prepare`` (fresh inputs, caches flushed), ``go`` (the calls), ``fetch``.

The unit: docs/harness-workers.md, "One worker process, and the requests it answers"; the input ring (``ring_seed``,
``InputRing``: a timed call's inputs mixed from two sets of a small per-case ring of ``get_inputs`` sets): "Timing from
outside, adaptively".
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch

from harness.guards import SEAL_CALLS, SEAL_READER_SOURCE, seal, seal_reader_loaded, use_seal_reader
from harness.ipc import tensor_spec
from harness.worker_common import encode, flat_tensors, make_inputs

RING_FLAG = 1 << 62  # a seed at or above this names ring sets (ring_seed); below it, a fresh set (get_inputs)
RING_KEY_BITS = 20  # ring keys and mixing seeds: 1 .. 2**20 - 1
# positions of every input tensor taken from the second ring set: at least RING_MIX, and one in RING_MIX_SHARE (an
# output that depends on few of its inputs, such as a maximum over a long row, then still changes in many calls)
RING_MIX = 64
RING_MIX_SHARE = 64
RING_RUN = 16  # ...taken in runs of this many consecutive elements where that leaves RING_MIX runs or more (a 64-byte
# cache line of float32: mixing single elements at random touched a cache line per element, ~0.7 ms per 16 MB call)
RING_BYTES = 512 << 20  # ring sets a worker keeps per case at most (least recently used go; rebuilt on demand)

# the cache scrub between the honest shell's calls (TimedCalls.honest_dispatch): the call's data, within these bounds
SCRUB_MIN, SCRUB_MAX = 256 << 10, 2 << 20


def ring_seed(first: int, second: int, mix: int) -> int:
    """The seed of a timed call whose inputs are ring set ``first`` with positions drawn by ``mix`` from ``second``."""
    limit = 1 << RING_KEY_BITS
    if not (0 < first < limit and 0 < second < limit and 0 <= mix < limit) or first == second:
        raise ValueError(f"invalid ring seed parts {first}, {second}, {mix}")
    return RING_FLAG | first << (2 * RING_KEY_BITS) | second << RING_KEY_BITS | mix


def ring_parts(seed: int) -> tuple[int, int, int] | None:
    """(first, second, mix) of a ring seed, None for a plain seed."""
    if seed < RING_FLAG:
        return None
    mask = (1 << RING_KEY_BITS) - 1
    return seed >> (2 * RING_KEY_BITS) & mask, seed >> RING_KEY_BITS & mask, seed & mask


def _mixable(inputs: list[Any]) -> bool:
    """Whether a set's copies can be mixed: dense tensors and plain scalars only (a nested list of tensors would be
    shared between calls, a sparse or quantized tensor cannot be indexed per position)."""
    for x in inputs:
        if isinstance(x, torch.Tensor):
            if x.layout != torch.strided or x.is_quantized:
                return False
        elif not (x is None or isinstance(x, (bool, int, float, complex, str))):
            return False
    return True


def _layout(t: torch.Tensor) -> tuple:
    return (t.shape, t.stride(), t.storage_offset(), t.dtype, t.device, t.requires_grad)


def _runs(t: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor's elements as rows of RING_RUN (the last numel % RING_RUN left out)."""
    runs = t.numel() // RING_RUN
    return t.view(-1)[: runs * RING_RUN].view(runs, RING_RUN)


def _nbytes(inputs: list[Any]) -> int:
    return sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))


class InputRing:
    """Ring sets of one case (``get_inputs`` under a ring key), and the mixed copies timed calls get."""

    def __init__(self, limit_bytes: int = RING_BYTES) -> None:
        self.limit = limit_bytes
        self.owner: Any = None  # (module, case name, device) the sets were built for
        self.sets: OrderedDict[int, list[Any]] = OrderedDict()
        # the copies given out since the last recycle(): (tensor, (ring set, input's index), runs mixed in or None,
        # its _version then)
        self.issued: list[tuple[torch.Tensor, tuple[int, int], Any, int]] = []
        self.spare: dict[tuple, dict[tuple[int, int], list[tuple]]] = {}  # copies no call uses: by layout, by origin
        self.probe = torch.Generator().manual_seed(1)  # the runs checked before a copy is reused (not the mixing's)

    def recycle(self) -> None:
        """The copies given out so far are done with (their unit was timed and fetched): the next calls' copies are
        made in them (docs/harness-workers.md, "Timing from outside, adaptively")."""
        self.spare = {}
        for item in self.issued:
            self.spare.setdefault(_layout(item[0]), {}).setdefault(item[1], []).append(item)
        self.issued = []

    def _copy(self, x: torch.Tensor, origin: tuple[int, int]) -> torch.Tensor:
        """A tensor holding ``x`` (``origin``: its ring set and index in it): a spare copy of the same origin with its
        last mixed runs put back (if unchanged since: its version counter, and RING_MIX runs drawn at random compared
        with ``x``), else a spare of its layout rewritten whole, else a new one."""
        by_set = self.spare.get(_layout(x), {})
        if by_set.get(origin):
            fresh, _, rows, version = by_set[origin].pop()
            if rows is not None and fresh._version == version:
                into, source = _runs(fresh), _runs(x)
                into.index_copy_(0, rows, source.index_select(0, rows))
                probe = torch.randint(len(into), (RING_MIX,), generator=self.probe).to(x.device)
                if torch.equal(into.index_select(0, probe), source.index_select(0, probe)):
                    return fresh
            return fresh.copy_(x)
        spare = next((copies for copies in by_set.values() if copies), None)
        return spare.pop()[0].copy_(x) if spare else x.clone()

    def inputs(self, module: Any, seed: int, device: str, case_name: str) -> list[Any]:
        parts = ring_parts(seed)
        if parts is None:
            return make_inputs(module, seed, device, case_name)
        first, second, mix = parts
        if self.owner != (module, case_name, device):
            self.owner, self.sets, self.issued, self.spare = (module, case_name, device), OrderedDict(), [], {}
        base, donor = self._set(module, first, device, case_name), self._set(module, second, device, case_name)
        if not (_mixable(base) and _mixable(donor)):  # nested, sparse, quantized, ...: a fresh set, as before
            return make_inputs(module, seed & (RING_FLAG - 1), device, case_name)
        generator = torch.Generator().manual_seed(seed & ((1 << 63) - 1))
        out: list[Any] = []
        copies: dict[int, torch.Tensor] = {}  # the same tensor twice in a set stays one tensor
        with torch.no_grad():
            for i, (x, y) in enumerate(zip(base, donor)):
                if not isinstance(x, torch.Tensor):
                    out.append(x)
                    continue
                if id(x) in copies:
                    out.append(copies[id(x)])
                    continue
                fresh = self._copy(x, (first, i))
                rows = None
                if x.numel() and isinstance(y, torch.Tensor) and y.shape == x.shape:
                    count = min(x.numel(), max(RING_MIX, x.numel() // RING_MIX_SHARE))
                    runs = x.numel() // RING_RUN if count >= RING_MIX * RING_RUN else 0
                    if runs and fresh.is_contiguous() and y.is_contiguous():  # ~0.1 ms for 4096 runs of 16
                        rows = torch.randint(runs, (count // RING_RUN,), generator=generator).to(x.device)
                        _runs(fresh).index_copy_(0, rows, _runs(y).index_select(0, rows))
                    elif fresh.is_contiguous() and y.is_contiguous():
                        flat = torch.randint(x.numel(), (count,), generator=generator).to(x.device)
                        fresh.view(-1).index_copy_(0, flat, y.reshape(-1).index_select(0, flat))
                    else:  # strides kept as get_inputs made them (index_put: ~25 ms for 65536 positions)
                        flat = torch.randint(x.numel(), (count,), generator=generator).to(x.device)
                        where = torch.unravel_index(flat, x.shape)
                        fresh[where] = y[where]
                if x.requires_grad:
                    fresh.requires_grad_(True)
                copies[id(x)] = fresh
                self.issued.append((fresh, (first, i), rows, fresh._version))
                out.append(fresh)
        return out

    def _set(self, module: Any, key: int, device: str, case_name: str) -> list[Any]:
        if key in self.sets:
            self.sets.move_to_end(key)
            return self.sets[key]
        inputs = make_inputs(module, key, device, case_name)
        self.sets[key] = inputs
        total = sum(_nbytes(v) for v in self.sets.values())
        while len(self.sets) > 2 and total > self.limit:  # the two sets of this call stay
            _, dropped = self.sets.popitem(last=False)
            total -= _nbytes(dropped)
        return inputs


def _no_copy(value: Any, tensors: list[torch.Tensor]) -> Any:
    """``encode`` without the defensive copy (the outputs of a unit stay untouched until it is fetched)."""
    if type(value) is torch.Tensor and value.device.type == "cpu":
        tensors.append(value.detach())
        return {"t": len(tensors) - 1, "device": str(value.device), "stride": list(value.stride())}
    if isinstance(value, (tuple, list)):
        return {"seq": [_no_copy(v, tensors) for v in value]}
    return encode(value, tensors)


def native_seal() -> None:
    """Build (once, cached like any library; in a worker the parent compiles it) and load the seal's native reader
    (``harness.guards.seal``), unless loaded. A CPU target's candidate worker does so before the candidate's code is
    imported, the reference worker before its first unit (its seal costs what the candidate's does); either stops
    with a CompileError naming it where it cannot be built."""
    if seal_reader_loaded():
        return
    from harness import cpu
    from harness.errors import CompileError

    try:
        library = cpu.compile_cpp(SEAL_READER_SOURCE)
    except CompileError as exc:
        raise CompileError(f"the harness's seal reader could not be built: {exc}") from exc
    use_seal_reader(str(library.path))


class TimedCalls:
    def __init__(self, target: Any, hardware: Any, seal_reader: bool = False) -> None:
        if seal_reader and target.device == "cpu":  # the candidate's: before its code is imported (patch-checked)
            native_seal()
        self.target = target
        self.hardware = hardware
        self.timer: Any = None
        self.inputs: list[list[Any]] = []
        self.seeds: list[int] = []
        self.outputs: list[Any] = []
        self.previous: list[Any] = []
        self.held: list[torch.Tensor] = []
        self.ring = InputRing()
        self.blank = [torch.zeros(SEAL_CALLS)] * SEAL_CALLS  # what an empty unit seals (go)

    def prepare(self, module: Any, model_state: list[torch.Tensor], seeds: list[int], case_name: str) -> None:
        if self.timer is None:
            self.timer = self.target.timer(self.hardware)
            if self.target.device == "cpu":  # the reference worker's (the candidate's is loaded already)
                native_seal()
        device = self.target.device
        self.seeds = list(seeds)
        self.ring.recycle()  # the last unit's inputs: timed, fetched, no longer used
        self.inputs = [self.ring.inputs(module, seed, device, case_name) for seed in self.seeds]
        tensors = [x for inputs in self.inputs for x in inputs if isinstance(x, torch.Tensor)]
        self.timer.flush(tensors + list(model_state))
        self.target.synchronize()

    def go(self, model: Any) -> tuple[int, list[dict[str, Any]]]:
        """The unit's calls, then its seal (``harness.guards.seal``) in the same request, before the reply: no
        moment in which the worker waits while the outputs could still change unseen. An empty unit seals stand-ins
        for as many outputs, so the round trip subtracted from every unit includes the seal's cost."""
        outputs = []
        with torch.no_grad():  # sealed before leaving it: its exit alone took 5-40 us, a fill's head start
            for inputs in self.inputs:
                outputs.append(model(*inputs))
            self.target.synchronize()
            sealed = seal(outputs or self.blank)
        self.previous, self.outputs = self.outputs, outputs
        return len(outputs), sealed

    def honest_dispatch(self, cpu_ms: float) -> tuple[int, int]:
        """``HonestShell`` called on the unit's input sets for ``cpu_ms`` of this thread's CPU, a cache scrub before
        each call; returns (calls, output tensors a call). docs/harness-workers.md, "Reference calls below Python"."""
        import time

        shapes = [flat_tensors(out) for out in self.outputs]
        if not shapes or not self.inputs:
            return 0, 0
        data = sum(t.numel() * t.element_size() for t in shapes[0] + flat_tensors(self.inputs[0]))
        size = min(SCRUB_MAX, max(SCRUB_MIN, data))
        scrub, source = bytearray(size), bytes(size)
        shell = HonestShell()
        calls, end = 0, time.thread_time_ns() + int(cpu_ms * 1e6)
        made: Any = None  # each call's outputs stay alive until the next
        with torch.no_grad():
            while True:
                for inputs, outs in zip(self.inputs, shapes):
                    scrub[:] = source
                    made = shell(outs, *inputs)
                    calls += 1
                if time.thread_time_ns() >= end:
                    break
            self.target.synchronize()
        del made
        return calls, len(shapes[0])

    def fetch(self) -> tuple[list[dict[str, Any]], list[torch.Tensor]]:
        tensors: list[torch.Tensor] = []
        items = [{"seed": seed, "output": _no_copy(out, tensors)} for seed, out in zip(self.seeds, self.outputs)]
        return items, tensors

    def remote(self, tensors: list[torch.Tensor]) -> list[dict[str, Any]]:
        """Where each tensor of a ``fetch`` lies in this process, for the parent to read (``harness.remote_memory``);
        the tensors (contiguous CPU copies where they were not) stay alive until the next fetch."""
        self.held = [t.detach().to("cpu").contiguous() for t in tensors]
        return [{**tensor_spec(t, t.numel() * t.element_size()), "addr": t.data_ptr()} for t in self.held]

    def reused_buffer(self) -> str | None:
        """A description of an output that shares memory with another output of this or the last unit.

        A sweep over the storages sorted by start address (n log n: a unit holds up to thousands of
        calls): a span overlaps an earlier one of another output exactly when it starts below the
        highest end seen among the other outputs, so the two highest ends of distinct outputs suffice."""
        spans = []
        for which, outs in (("this", self.outputs), ("previous", self.previous)):
            for i, out in enumerate(outs):
                for t in flat_tensors(out):
                    storage = t.untyped_storage()
                    if storage.nbytes():
                        spans.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes(), (which, i)))
        spans.sort(key=lambda span: span[0])
        top: list[tuple[int, tuple[str, int]]] = []  # (end, owner) of the highest ends, distinct owners, at most 2
        for lo, hi, owner in spans:
            for end, other in top:
                if other != owner and lo < end:
                    first, second = sorted((owner, other), key=lambda o: (o[0] != "this", o[1]))
                    return (
                        f"the output of timed call {first[1]} ({first[0]} unit) and of call {second[1]} "
                        f"({second[0]} unit) share memory"
                    )
            ends = {o: e for e, o in top}
            ends[owner] = max(hi, ends.get(owner, 0))
            top = sorted(((e, o) for o, e in ends.items()), reverse=True)[:2]
        return None


class HonestShell(torch.nn.Module):
    """An honest kernel with an empty body: what its forward does in libtorch besides its own compute."""

    def forward(self, like: list[torch.Tensor], *inputs: Any) -> list[torch.Tensor]:
        for x in inputs:
            if isinstance(x, torch.Tensor):
                x = x.contiguous()
                _native_argument(x)
        outs = [torch.empty_like(t) for t in like]
        for y in outs:
            _native_argument(y)
        return outs


def _native_argument(t: torch.Tensor) -> int:
    """What handing a tensor to native code checks and reads (``harness.cpu``'s ctypes path)."""
    _ = (t.device.type, str(t.dtype), t.is_contiguous())
    return t.data_ptr()
