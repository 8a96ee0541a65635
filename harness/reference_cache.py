"""Reference outputs computed once: a cache on disk, in the parent, with an integrity hash.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import struct
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

import torch

from harness import settings
from harness.commands import secret_file
from harness.ipc import DTYPES

FORMAT = "kope.refcache/3"  # 2: every entry carries its inputs' digest; 3: outputs' strides, index outputs' inputs
_MAGIC = b"KREF"


def folder() -> Path:
    from harness.commands import cache_root

    path = cache_root() / "refs"
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def seed_salt() -> bytes:
    """A random secret kept in the (hidden) cache folder, created on first use."""
    return secret_file(folder() / "seed-salt")


def derived_seed(salt: bytes, *parts: Any) -> int:
    h = hashlib.blake2b(json.dumps(parts, sort_keys=True, default=str).encode(), key=salt[:32], digest_size=8)
    return int.from_bytes(h.digest(), "little") & ((1 << 31) - 1)


def task_digest(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def entry_key(context: dict[str, Any], case: dict[str, Any], init_seed: int, seed: int, retries: int) -> str:
    material = {
        "format": FORMAT,
        **context,
        "case": case,
        "init_seed": init_seed,
        "seed": seed,
        "retries": retries,
        "torch": torch.__version__,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True, default=str).encode()).hexdigest()


def _path(key: str) -> Path:
    return folder() / key[:2] / f"{key}.kref"


MEMO_BYTES = 512 << 20  # verified entries kept in memory per process at most (least recently used dropped)
_memo: OrderedDict[str, tuple[tuple[int, ...], dict[str, Any], list[torch.Tensor], int]] = OrderedDict()
_memo_bytes = 0
_memo_lock = threading.Lock()
verified_reads = 0  # entries this process read from disk and checked (SHA-256): each file once while it is unchanged


def _identity(st: os.stat_result) -> tuple[int, ...]:
    """What changes whenever a file is rewritten, replaced or touched (the change time cannot be set back)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def load(key: str) -> tuple[dict[str, Any], list[torch.Tensor]] | None:
    """The stored trial and its tensors, or None (absent, unreadable or failing its integrity hash).

    The tensors may be the ones an earlier ``load`` of the same unchanged file returned: callers read them only."""
    global verified_reads
    path = _path(key)
    try:
        now = _identity(path.stat())
    except OSError:
        _forget(key)
        return None
    with _memo_lock:
        kept = _memo.get(key)
        if kept is not None and kept[0] == now:
            _memo.move_to_end(key)
            return copy.deepcopy(kept[1]), list(kept[2])
    try:
        with open(path, "rb") as f:
            before = _identity(os.fstat(f.fileno()))
            data = bytearray(before[2])
            got = f.readinto(data)
            after = _identity(os.fstat(f.fileno()))
    except OSError:
        _forget(key)
        return None
    verified_reads += 1
    entry = _parse(key, data, got)
    if entry is None:
        _forget(key)
        return None
    if before == after and got == before[2]:  # the bytes checked are the file's as identified
        _remember(key, after, entry[0], entry[1], got)
    return copy.deepcopy(entry[0]), list(entry[1])


def _parse(key: str, data: bytearray, size: int) -> tuple[dict[str, Any], list[torch.Tensor]] | None:
    """An entry's trial and tensors (views of ``data``, no copy) if its header names ``key`` and its bytes match their
    SHA-256; else None."""
    try:
        if size != len(data) or data[:4] != _MAGIC:
            return None
        (length,) = struct.unpack("<Q", data[4:12])
        header = json.loads(bytes(data[12 : 12 + length]))
        body = memoryview(data)[12 + length :]
        if header.get("key") != key or hashlib.sha256(body).hexdigest() != header.get("sha256"):
            return None
        tensors, offset = [], 12 + length
        for spec in header["tensors"]:
            dtype = DTYPES[spec["dtype"]]
            nbytes = spec["nbytes"]
            if not (isinstance(nbytes, int) and 0 <= nbytes and offset + nbytes <= len(data)):
                return None
            if nbytes:
                t = torch.frombuffer(data, dtype=torch.uint8, count=nbytes, offset=offset)
                tensors.append(t.view(dtype).reshape(spec["shape"]))
            else:
                tensors.append(torch.empty(spec["shape"], dtype=dtype))
            offset += nbytes
        return header["trial"], tensors
    except (ValueError, KeyError, TypeError, RuntimeError, struct.error):
        return None


def _remember(
    key: str, identity: tuple[int, ...], trial: dict[str, Any], tensors: list[torch.Tensor], size: int
) -> None:
    global _memo_bytes
    if size > MEMO_BYTES:
        return
    with _memo_lock:
        old = _memo.pop(key, None)
        if old is not None:
            _memo_bytes -= old[3]
        _memo[key] = (identity, trial, tensors, size)
        _memo_bytes += size
        while _memo_bytes > MEMO_BYTES and _memo:
            _, dropped = _memo.popitem(last=False)
            _memo_bytes -= dropped[3]


def _forget(key: str) -> None:
    global _memo_bytes
    with _memo_lock:
        old = _memo.pop(key, None)
        if old is not None:
            _memo_bytes -= old[3]


def forget_all() -> None:
    """Drop every verified entry kept in memory (the next ``load`` of each reads and checks its file again)."""
    global _memo_bytes
    with _memo_lock:
        _memo.clear()
        _memo_bytes = 0


def store(key: str, trial: dict[str, Any], tensors: list[torch.Tensor]) -> None:
    """Write one entry atomically; a failure to write only costs a recomputation next time."""
    from harness.ipc import tensor_bytes, tensor_spec

    payloads = [bytes(tensor_bytes(t)) for t in tensors]
    body = b"".join(payloads)
    header = {
        "key": key,
        "format": FORMAT,
        "trial": trial,
        "sha256": hashlib.sha256(body).hexdigest(),
        "tensors": [tensor_spec(t, len(p)) for t, p in zip(tensors, payloads)],
    }
    head = json.dumps(header).encode()
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(_MAGIC + struct.pack("<Q", len(head)) + head)
            f.write(body)
        os.replace(tmp, path)
    except OSError:
        return
    _evict_if_needed(len(head) + len(body))


_written = 0


def _limit_bytes() -> int:
    """The cache's size cap (``KOPE_HARNESS_REF_CACHE_MB``, default 2048 MiB); oldest entries go first."""
    return settings.ref_cache_bytes()


def _evict_if_needed(added: int) -> None:
    """Every 256 MiB written, drop the least recently used entries beyond the size cap."""
    global _written
    _written += added
    if _written < (256 << 20):
        return
    _written = 0
    entries = []
    for sub in folder().iterdir():
        if sub.is_dir():
            for f in sub.glob("*.kref"):
                try:
                    st = f.stat()
                    entries.append((st.st_atime, st.st_size, f))
                except OSError:
                    continue
    total, limit = sum(e[1] for e in entries), _limit_bytes()
    for _, size, f in sorted(entries):
        if total <= limit:
            break
        try:
            f.unlink()
            total -= size
        except OSError:
            continue
