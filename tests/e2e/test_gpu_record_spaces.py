"""scripts/gpu_record_spaces.sh, the recording of Triton search spaces on an NVIDIA GPU (issue 34), on this CPU
machine: its refusals (one `error:` line, exit 2) and, under TRITON_INTERPRET=1 (correctness only, no timings),
its parts, budget and resumable output. On a GPU the script itself is the check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_record_spaces.sh"


def run(*args: str, timeout: float = 240, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), *args],
        env={**os.environ, "PYTHON": sys.executable, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_error(proc: subprocess.CompletedProcess[str], text: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], proc.stderr[-2000:])
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and text in errors[0], proc.stderr


def test_without_a_folder_or_with_a_bad_budget_it_says_so_and_records_nothing(tmp_path):
    one_error(run(), "usage: scripts/gpu_record_spaces.sh OUT_DIR")
    one_error(run(str(tmp_path / "a"), GPU_RECORD_BUDGET_S="ten"), "GPU_RECORD_BUDGET_S must be a whole number")
    assert not (tmp_path / "a").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the script records there")
def test_without_a_gpu_it_refuses_with_one_clear_error(tmp_path):
    one_error(run(str(tmp_path / "spaces")), "no NVIDIA GPU visible to torch")
    assert not (tmp_path / "spaces").exists()


def test_a_part_cut_by_the_budget_keeps_what_it_measured_and_says_to_run_it_again(tmp_path):
    """Elementwise only, under the Triton interpreter: the first part (180 settings, 20-40 s each here) is cut by
    a 50 s budget; what was measured is on disk, the transfer part did not run, exit 3."""
    out = tmp_path / "spaces"
    proc = run(
        str(out),
        timeout=300,
        GPU_RECORD_ALLOW_INTERPRET="1",
        TRITON_INTERPRET="1",
        GPU_RECORD_FAMILIES="elementwise",
        GPU_RECORD_BUDGET_S="50",
    )
    assert proc.returncode == 3, (proc.stdout[-3000:], proc.stderr[-3000:])
    rows = {
        line.split()[0] + (" t" if "(transfer)" in line else ""): line
        for line in proc.stdout.splitlines()
        if line.strip()
    }
    assert rows["elementwise"].split()[1] == "cut", proc.stdout
    assert "not run" in rows["elementwise t"], proc.stdout
    assert f"run scripts/gpu_record_spaces.sh {out} again" in proc.stdout
    files = sorted(out.glob("*.space.json"))
    assert files and files[0].name == "add_scaled.pointwise.space.json", files
    space = json.loads(files[0].read_text())
    assert space["target"] == "triton" and space["settings"], space
    assert all(e["outcome"]["status"] == "correct" for e in space["settings"])
