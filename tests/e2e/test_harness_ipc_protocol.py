"""A worker whose reply is malformed (a wrong type, an unknown field, no ``ok``) is a broken worker: the evaluation
ends as ``runtime_error:protocol`` (``harness.ipc`` decodes every reply as the answer to the request it was sent
for), never with a ``KeyError`` in the parent.

The candidate rewrites its worker's replies on their way out through ``json.dumps`` (as
``tests/adversarial/patch_worker_reply.py`` does; the in-process patch check does not watch it), so the
malformed reply comes through the real pipe from a real, sandboxed worker.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.evaluate import EvalOptions, evaluate

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "fixtures" / "tasks" / "tiny_relu.py"
OPTIONS = EvalOptions(timing=False, seeds=1, case_timeout_s=60, static_checks=False)

REWRITES = {
    "wrong_type": 'obj = {**obj, "trials": "none"}',
    "unknown_field": 'obj = {**obj, "verdict": "correct"}',
    "no_ok": 'obj = {k: v for k, v in obj.items() if k != "ok"}',
}

CANDIDATE = """
import json

import torch.nn as nn

_dumps = json.dumps


def _rewritten(obj, *args, **kwargs):
    if isinstance(obj, dict) and "trials" in obj:
        {rewrite}
    return _dumps(obj, *args, **kwargs)


json.dumps = _rewritten


class ModelNew(nn.Module):
    def forward(self, x):
        return x.clone()
"""


@pytest.mark.parametrize("how", sorted(REWRITES))
def test_a_malformed_reply_from_the_candidates_worker_is_a_protocol_error(tmp_path, how):
    path = tmp_path / "cand.py"
    path.write_text(textwrap.dedent(CANDIDATE).replace("{rewrite}", REWRITES[how]))
    outcome = evaluate(TASK, path, OPTIONS)
    assert outcome.error_kind == "runtime_error:protocol", outcome.error_excerpt
    assert "sent a malformed reply" in (outcome.error_excerpt or ""), outcome.error_excerpt
