"""Deterministic identifiers.

Every node has a local ``id`` (unique inside its namespace, shown to users,
written to exports) and a ``uid`` = ``"<namespace>/<id>"`` that carries the
uniqueness constraint. Neo4j Community only has single-property uniqueness
constraints, so the namespace is part of the constrained value; namespaces
cannot contain ``/`` (config validation), so ``uid`` is unambiguous.

Ids are derived from content, never from a counter, so writing the same
thing twice (a replay of the journal, an import, a retried transaction)
MERGEs onto the same node:

========== ============================================= ===========================
node       local id                                      example
========== ============================================= ===========================
Operator   operator name                                 ``softmax``
Hardware   the fingerprint's stable id                   ``cpu-3f9a1c2e``
Task       operator @ target # hash of the case set      ``softmax@cpu#1a2b3c4d``
Run        chosen by the caller (or generated)           ``run-20251130-120000-ab12cd``
Decision   run id : s step                               ``run-...-ab12cd:s3``
Outcome    same as its Decision (one outcome per attempt) ``run-...-ab12cd:s3``
Kernel     sha256 of the source                          ``9f86d0...`` (64 hex)
Insight    kind : family : hardware class : key          ``rule:normalization:x86_64-avx2:compile_error``
Knowledge  the document's id                             ``cpu-openmp-basics``
========== ============================================= ===========================
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time
from typing import Any

from kope.memory.errors import InvalidRecordError

_LOCAL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@#+=\-]{0,199}$")


def check_local_id(value: str, what: str) -> str:
    if not isinstance(value, str) or not _LOCAL_ID.match(value):
        raise InvalidRecordError(
            f"{what} {value!r} is not a valid id (1-200 characters: letters, digits and _ . : @ # + = -, starting with a letter or digit)"
        )
    return value


def uid(namespace: str, local_id: str) -> str:
    return f"{namespace}/{local_id}"


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def content_hash(value: Any, length: int = 64) -> str:
    text = value if isinstance(value, str) else canonical_json(value)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def kernel_id(source: str) -> str:
    return content_hash(source)


def task_id(operator: str, target: str, cases: list[Any]) -> str:
    return f"{operator}@{target}#{content_hash(cases, 8)}"


def decision_id(run_id: str, step: int) -> str:
    return f"{run_id}:s{step}"


def new_run_id() -> str:
    return time.strftime("run-%Y%m%d-%H%M%S-", time.gmtime()) + secrets.token_hex(3)


def insight_id(kind: str, family: str, hw_class: str, key: str) -> str:
    return f"{kind}:{family}:{hw_class}:{key}"
