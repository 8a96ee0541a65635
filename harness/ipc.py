"""Messages between the harness and its worker processes: a JSON header plus raw tensor bytes.

Nothing is unpickled: a worker that runs candidate code is not trusted, so the
parent only parses JSON and copies bytes into tensors of allow-listed dtypes,
after checking that each declared size matches its shape and the whole message
stays under a size limit.

Frame: ``b"KOPE"``, an 8-byte little-endian header length, the UTF-8 JSON
header (``{"tensors": [{"dtype", "shape", "nbytes"}...], ...}``), then the
tensors' bytes back to back.
"""

from __future__ import annotations

import json
import math
import os
import select
import struct
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

MAGIC = b"KOPE"
MAX_HEADER = 64 << 20
DTYPES = {
    name: getattr(torch, name)
    for name in (
        "float64",
        "float32",
        "float16",
        "bfloat16",
        "int64",
        "int32",
        "int16",
        "int8",
        "uint8",
        "bool",
        "complex64",
        "complex128",
    )
}


class ProtocolError(Exception):
    """The peer sent something that is not a valid message."""


class PeerClosed(Exception):
    """The peer closed its end (it exited or crashed)."""


class ReadTimeout(Exception):
    """No complete message before the deadline."""


def tensor_bytes(t: torch.Tensor) -> memoryview:
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    if flat.numel() == 0:
        return memoryview(b"")
    return flat.view(torch.uint8).numpy().data


def write_message(fd: int, header: dict[str, Any], tensors: Sequence[torch.Tensor] = ()) -> None:
    header = dict(header)
    payloads = [tensor_bytes(t) for t in tensors]
    header["tensors"] = [
        {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "nbytes": len(p)}
        for t, p in zip(tensors, payloads)
    ]
    head = json.dumps(header, allow_nan=True).encode()
    _write_all(fd, MAGIC + struct.pack("<Q", len(head)) + head)
    for payload in payloads:
        _write_all(fd, payload)


def _write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view[: 1 << 24])
        view = view[written:]


def check_tensor_spec(
    spec: Any, error: type[Exception] = ProtocolError, what: str = "tensor"
) -> tuple[torch.dtype, list[int], int]:
    """(dtype, shape, nbytes) of one ``{"dtype", "shape", "nbytes"}`` description a worker sent, or ``error`` for
    the first thing wrong with it (a dtype outside the allow-list, a bad shape, a size that does not match)."""
    if not isinstance(spec, dict):
        raise error(f"bad {what} description {spec!r}")
    dtype, shape, nbytes = spec.get("dtype"), spec.get("shape"), spec.get("nbytes")
    if dtype not in DTYPES or not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise error(f"bad {what} description {spec!r}")
    expected = math.prod(shape) * DTYPES[dtype].itemsize
    if type(nbytes) is not int or nbytes != expected:
        raise error(f"tensor of shape {shape} and dtype {dtype} declares {nbytes} bytes, expected {expected}")
    return DTYPES[dtype], shape, nbytes


class MessageReader:
    """Reads messages from a pipe with a deadline; ``on_wait`` runs between polls (e.g. a memory watchdog)."""

    def __init__(self, fd: int, max_bytes: int) -> None:
        self.fd = fd
        self.max_bytes = max_bytes

    def read(
        self, timeout: float, on_wait: Callable[[], None] | None = None
    ) -> tuple[dict[str, Any], list[torch.Tensor]]:
        deadline = time.monotonic() + timeout
        prefix = self._exact(12, deadline, on_wait)
        if prefix[:4] != MAGIC:
            raise ProtocolError(f"bad message prefix {bytes(prefix[:4])!r}")
        (length,) = struct.unpack("<Q", prefix[4:])
        if length > MAX_HEADER:
            raise ProtocolError(f"message header of {length} bytes is over the {MAX_HEADER} limit")
        try:
            header = json.loads(bytes(self._exact(length, deadline, on_wait)))
        except ValueError as exc:
            raise ProtocolError(f"message header is not JSON: {exc}") from None
        if not isinstance(header, dict):
            raise ProtocolError("message header is not a JSON object")
        specs = header.pop("tensors", [])
        total = 0
        for spec in specs:
            total += check_tensor_spec(spec)[2]
        if total > self.max_bytes:
            raise ProtocolError(f"message of {total} bytes is over the {self.max_bytes}-byte limit")
        tensors = []
        for spec in specs:
            dtype = DTYPES[spec["dtype"]]
            if spec["nbytes"] == 0:
                tensors.append(torch.empty(spec["shape"], dtype=dtype))
                continue
            raw = self._exact(spec["nbytes"], deadline, on_wait)
            tensors.append(torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(spec["shape"]))
        return header, tensors

    def _exact(self, n: int, deadline: float, on_wait: Callable[[], None] | None) -> bytearray:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ReadTimeout()
            wait = None if (on_wait is None and remaining == float("inf")) else min(remaining, 0.05)
            ready, _, _ = select.select([self.fd], [], [], wait)
            if not ready:
                if on_wait is not None:
                    on_wait()
                continue
            try:
                chunk = os.readv(self.fd, [view[got : got + min(n - got, 1 << 24)]])
            except BlockingIOError:
                continue
            if chunk == 0:
                raise PeerClosed()
            got += chunk
        return buf


def read_message_blocking(fd: int) -> tuple[dict[str, Any], list[torch.Tensor]]:
    """Worker side: wait as long as it takes for the parent's next request."""
    return MessageReader(fd, max_bytes=1 << 62).read(timeout=float("inf"))
