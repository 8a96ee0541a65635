"""Worker messages: JSON + raw tensor bytes; nothing unpickled; malformed or oversized messages rejected."""

import os
import struct
import threading

import pytest
import torch

from harness.ipc import MessageReader, PeerClosed, ProtocolError, ReadTimeout, write_message


def roundtrip(header, tensors, max_bytes=1 << 30):
    r, w = os.pipe()
    result = {}

    def read():
        try:
            result["msg"] = MessageReader(r, max_bytes).read(timeout=30)
        except Exception as exc:  # handed to the test thread
            result["exc"] = exc

    t = threading.Thread(target=read)
    t.start()
    try:
        write_message(w, header, tensors)
    except BrokenPipeError:
        pass
    os.close(w)
    t.join()
    os.close(r)
    if "exc" in result:
        raise result["exc"]
    return result["msg"]


@pytest.mark.parametrize(
    "dtype",
    [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8, torch.bool],
)
def test_tensors_round_trip_bit_exactly(dtype):
    t = (torch.randn(17, 5) * 10).to(dtype)
    header, (back,) = roundtrip({"op": "x", "n": 1}, [t])
    assert header == {"op": "x", "n": 1} and back.dtype == dtype and torch.equal(back, t)


def test_empty_and_strided_tensors_round_trip():
    empty = torch.empty(0, 3)
    strided = torch.randn(4, 6).t()
    _, (a, b) = roundtrip({}, [empty, strided])
    assert a.shape == (0, 3) and torch.equal(b, strided)


def test_oversized_messages_are_rejected():
    with pytest.raises(ProtocolError, match="over the 100-byte limit"):
        roundtrip({}, [torch.zeros(1000)], max_bytes=100)


def _raw(payload: bytes):
    r, w = os.pipe()
    os.write(w, payload)
    os.close(w)
    try:
        return MessageReader(r, 1 << 20).read(timeout=5)
    finally:
        os.close(r)


def test_garbage_and_lies_are_protocol_errors():
    with pytest.raises(ProtocolError, match="bad message prefix"):
        _raw(b"EVIL" + struct.pack("<Q", 2) + b"{}")
    head = b'{"tensors": [{"dtype": "float32", "shape": [4], "nbytes": 3}]}'
    with pytest.raises(ProtocolError, match="declares 3 bytes, expected 16"):
        _raw(b"KOPE" + struct.pack("<Q", len(head)) + head)
    head = b'{"tensors": [{"dtype": "object", "shape": [1], "nbytes": 8}]}'
    with pytest.raises(ProtocolError, match="bad tensor description"):
        _raw(b"KOPE" + struct.pack("<Q", len(head)) + head)


def test_a_closed_pipe_and_a_silent_peer_are_distinguished():
    with pytest.raises(PeerClosed):
        _raw(b"KOPE")
    r, w = os.pipe()
    try:
        with pytest.raises(ReadTimeout):
            MessageReader(r, 1 << 20).read(timeout=0.2)
    finally:
        os.close(r)
        os.close(w)
