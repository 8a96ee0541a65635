"""The ``--evaluator`` value: ``local``, worker URLs (``http[s]://HOST:PORT[,URL...]``), ``ray``, ``ray://ADDRESS``
or ``replay:DIR`` (answers from recorded search spaces, ``kope.evaluators.replay``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from kope.errors import UsageError

LOCAL = "local"
REPLAY = "replay:"
_HOST = re.compile(r"^[A-Za-z0-9.\-\[\]:]+$")


@dataclass(frozen=True)
class EvaluatorSpec:
    kind: str  # local | http | ray | replay
    urls: tuple[str, ...] = ()  # http: the workers' base URLs
    address: str | None = None  # ray: ray://HOST:PORT (Ray Client), or None for ray.init()'s own choice
    folder: str | None = None  # replay: the folder of recorded space files (an absolute path)

    def __str__(self) -> str:
        if self.kind == "http":
            return ",".join(self.urls)
        if self.kind == "ray":
            return self.address or "ray"
        if self.kind == "replay":
            return f"{REPLAY}{self.folder}"
        return LOCAL


def _worker_url(text: str) -> str:
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"bad worker URL {text!r}: give http://HOST:PORT or https://HOST:PORT")
    if parts.username or parts.password:
        raise UsageError(
            f"bad worker URL {text!r}: no credentials in the URL", hint="give the key in KOPE_WORKER_KEY instead"
        )
    if parts.query or parts.fragment:
        raise UsageError(f"bad worker URL {text!r}: no query or fragment")
    try:
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        raise UsageError(f"bad worker URL {text!r}: the port must be a number from 0 to 65535") from None
    if not _HOST.match(parts.netloc.rsplit("@", 1)[-1]):
        raise UsageError(f"bad worker URL {text!r}")
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"


def parse_evaluator(text: str | None) -> EvaluatorSpec:
    """Parse and validate an evaluator value (``None`` or empty: local)."""
    value = (text or LOCAL).strip()
    if value == LOCAL:
        return EvaluatorSpec(LOCAL)
    if value == "ray":
        return EvaluatorSpec("ray")
    if value.startswith("ray://"):
        if not value[len("ray://") :].strip("/"):
            raise UsageError(f"bad Ray address {value!r}: give ray://HOST:PORT (the cluster's Ray Client port)")
        return EvaluatorSpec("ray", address=value)
    if value.startswith(REPLAY):
        folder = value[len(REPLAY) :].strip()
        if not folder:
            raise UsageError(
                f"bad evaluator {value!r}: give replay:DIR, DIR a folder of recorded spaces (`kope bench record-space`)"
            )
        return EvaluatorSpec("replay", folder=str(Path(folder).expanduser().resolve()))
    if value.startswith(("http://", "https://")):
        urls = tuple(_worker_url(part.strip()) for part in value.split(",") if part.strip())
        if len(set(urls)) != len(urls):
            raise UsageError(f"--evaluator lists a worker twice: {value!r}")
        return EvaluatorSpec("http", urls=urls)
    raise UsageError(
        f"unknown evaluator {value!r}",
        hint="use local, worker URLs (http://HOST:PORT[,http://HOST2:PORT]), ray, ray://HOST:PORT or replay:DIR",
    )
