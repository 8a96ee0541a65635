"""Sticky device errors, and the probe that decides whether a device may go on timing kernels.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# (name, pattern): the messages CUDA / the driver / torch give for errors that may outlive the process
STICKY_SIGNATURES: tuple[tuple[str, str], ...] = (
    ("cuda:illegal_address", r"an illegal memory access was encountered|CUDA_ERROR_ILLEGAL_ADDRESS"),
    ("cuda:illegal_instruction", r"an illegal instruction was encountered|CUDA_ERROR_ILLEGAL_INSTRUCTION"),
    ("cuda:misaligned_address", r"misaligned address|CUDA_ERROR_MISALIGNED_ADDRESS"),
    ("cuda:launch_failure", r"unspecified launch failure|CUDA_ERROR_LAUNCH_FAILED"),
    ("cuda:ecc", r"uncorrectable ECC error|CUDA_ERROR_ECC_UNCORRECTABLE"),
    ("cuda:device_lost", r"GPU (?:has fallen off the bus|is lost)|device (?:is )?lost|CUDA_ERROR_DEVICE_UNAVAILABLE"),
    ("cuda:unknown_error", r"CUDA error: unknown error|CUDA_ERROR_UNKNOWN"),
    ("cuda:no_device", r"no CUDA-capable device is detected|CUDA driver initialization failed"),
)
_COMPILED = tuple((name, re.compile(pattern, re.IGNORECASE)) for name, pattern in STICKY_SIGNATURES)

PROBE_TIMEOUT_S = 180.0


def sticky_signature(texts: Iterable[str | None]) -> str | None:
    """The name of the first sticky-error signature found in ``texts``, else None."""
    for text in texts:
        if not text:
            continue
        for name, pattern in _COMPILED:
            if pattern.search(text):
                return name
    return None


def result_texts(result: Mapping[str, Any]) -> list[str | None]:
    """The texts of an evaluation result (``{"outcome": ...}`` or ``{"error": ...}``) that may carry one."""
    if "error" in result:
        return [str(result["error"].get("message"))]
    outcome = result.get("outcome") or {}
    return [outcome.get("error_excerpt"), *(c.get("error") for c in outcome.get("cases") or [])]


@dataclass
class ProbeResult:
    ok: bool
    detail: str  # what failed, or "ok"
    hardware: dict[str, Any] | None = None  # the device's fingerprint (by target) when the probe ran
    targets: tuple[str, ...] = ()


def run_probe(
    kind: str, env: Mapping[str, str], command: str | None = None, timeout: float = PROBE_TIMEOUT_S
) -> ProbeResult:
    """Probe a device (``cpu`` or ``cuda``) in fresh processes with ``env`` (its CUDA_VISIBLE_DEVICES):
    the built-in check, then the operator's ``command`` (a shell command; exit 0 means healthy)."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "harness.serve.probe", kind],
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return ProbeResult(False, f"the {kind} probe did not finish within {timeout:.0f} s")
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return ProbeResult(False, f"the {kind} probe failed (exit {proc.returncode}): " + " | ".join(tail))
    try:
        report = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return ProbeResult(False, f"the {kind} probe printed no report: {proc.stdout[-300:]!r}")
    result = ProbeResult(True, "ok", report["hardware"], tuple(report["targets"]))
    if command:
        try:
            custom = subprocess.run(
                command,
                shell=True,
                env={**env, "KOPE_PROBE_DEVICE": kind},
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return ProbeResult(False, f"--probe-command did not finish within {timeout:.0f} s", result.hardware)
        if custom.returncode != 0:
            tail = (custom.stderr or custom.stdout).strip().splitlines()[-3:]
            detail = f"--probe-command exited {custom.returncode}" + (": " + " | ".join(tail) if tail else "")
            return ProbeResult(False, detail, result.hardware, result.targets)
    return result


def probe_env(base: Mapping[str, str]) -> dict[str, str]:
    env = dict(base)
    env.setdefault("PYTHONPATH", "")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env["PYTHONPATH"]]))
    return env
