"""A hand-made results.json of a small bench (two configurations, three operators, one missing pair)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _attempt(
    step: int, cases: dict[str, tuple[bool, float | None]], speedup: float | None, prompt: int, completion: int = 0
) -> dict[str, Any]:
    return {
        "step": step,
        "decision_id": f"run:s{step}",
        "parent_id": None,
        "title": f"attempt {step}",
        "layer": "other",
        "status": "correct" if all(ok for ok, _ in cases.values()) else "incorrect",
        "error_kind": None,
        "label": "partial",
        "a": speedup,
        "speedup": speedup,
        "cases_total": len(cases),
        "cases_passed": sum(ok for ok, _ in cases.values()),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "cases": [
            {"name": n, "passed": ok, "speedup": s, "ref_ms": None, "cand_ms": None, "error": None}
            for n, (ok, s) in cases.items()
        ],
    }


def _pair(config: str, operator: str, index: int, attempts: list[dict], ended: float, decisions: int) -> dict[str, Any]:
    return {
        "config": config,
        "operator": operator,
        "index": index,
        "namespace": f"bench-unit-{config}",
        "run_id": f"run-{config}-{operator}",
        "status": "finished",
        "stop_reason": "step budget reached (2 steps)",
        "error": None,
        "resumed_from": None,
        "resumed_at": None,
        "started_at": ended - 5,
        "ended_at": ended,
        "seconds": 5.0,
        "attempts": attempts,
        "prompt_tokens": sum(a["prompt_tokens"] for a in attempts),
        "completion_tokens": 0,
        "memory_after": {"nodes": 20 + 5 * decisions, "decisions": decisions, "relationships": 3 * decisions},
        "overlapped_with": [],
    }


def results() -> dict[str, Any]:
    configs = [
        ("active", "active", True, "active context (graph-ranked tiers), memory on"),
        ("no-memory", "active", False, "active policy, retrieval off"),
    ]
    operators = [("relu", 1, ["a", "b"]), ("softmax", 1, ["a", "b"]), ("gemm_bias_relu", 2, ["a", "b", "c"])]
    pairs = [
        _pair(
            "active",
            "relu",
            0,
            [
                _attempt(0, {"a": (True, 1.5), "b": (True, 0.9)}, 1.16, 3000),
                _attempt(1, {"a": (True, 2.0), "b": (True, 1.8)}, 1.9, 3100),
            ],
            10,
            2,
        ),
        _pair("no-memory", "relu", 1, [_attempt(0, {"a": (True, 1.2), "b": (False, None)}, None, 2900)], 20, 1),
        _pair("active", "softmax", 2, [_attempt(0, {"a": (True, 1.1), "b": (True, 1.3)}, 1.2, 2800)], 30, 3),
        _pair("no-memory", "softmax", 3, [_attempt(0, {"a": (True, 1.0), "b": (True, 0.5)}, 0.7, 2950)], 40, 2),
        _pair("active", "gemm_bias_relu", 4, [], 50, 3),
        # no-memory · gemm_bias_relu never finished: missing
    ]
    return {
        "schema": "kope.bench/1",
        "command": "kope bench --suite builtin --configs active,no-memory --out unit",
        "options": {
            "suite": "builtin",
            "levels": [],
            "family": None,
            "limit": None,
            "cases": None,
            "target": "cpu",
            "proposer": "offline",
            "model": None,
            "steps": 2,
            "configs": ["active", "no-memory"],
            "workers": 1,
            "out": "unit",
            "name": "unit",
            "imports": [],
            "baseline": None,
        },
        "created_at": "2026-01-01T00:00:00+00:00",
        "updated_at": "2026-01-01T00:10:00+00:00",
        "complete": False,
        "pairs_total": 6,
        "hardware": {"id": "cpu-0", "class": "x86_64-avx2", "cpu_model": "Test CPU", "cores": 2},
        "baseline": "no-memory",
        "configurations": [
            {"name": n, "policy": p, "memory": m, "description": d, "namespace": f"bench-unit-{n}"}
            for n, p, m, d in configs
        ],
        "operators": [
            {"operator": o, "family": "elementwise", "level": lv, "path": f"/suite/{o}.py", "cases": cs}
            for o, lv, cs in operators
        ],
        "imports": [],
        "memory_start": {
            "active": {"nodes": 0, "decisions": 0, "relationships": 0},
            "no-memory": {"nodes": 0, "decisions": 0, "relationships": 0},
        },
        "pairs": pairs,
    }


def write(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "results.json"
    path.write_text(json.dumps(results(), indent=1))
    return path
