"""scripts/install_browser.sh, the step of the test command that provides headless Chromium: quiet when it is
there, one error line and a non-zero exit when it is missing and cannot be installed."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install_browser.sh"
BASH = shutil.which("bash") or "/bin/bash"


def _bin(tmp_path: Path, *names: str) -> Path:
    """A PATH folder holding only the named commands (each a stub that succeeds)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in names:
        stub = folder / name
        stub.write_text("#!/bin/sh\nexit 0\n")
        stub.chmod(0o755)
    return folder


def _run(path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("KOPE_CHROMIUM", "KOPE_CHROMEDRIVER")}
    return subprocess.run(
        [BASH, str(SCRIPT)], capture_output=True, text=True, env={**clean, "PATH": str(path), **env}, timeout=30
    )


def test_it_is_quiet_when_chromium_and_its_driver_are_installed(tmp_path):
    proc = _run(_bin(tmp_path, "chromium", "chromedriver"))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_it_is_quiet_when_the_binaries_are_named_by_the_environment(tmp_path):
    proc = _run(_bin(tmp_path), KOPE_CHROMIUM="/opt/chrome/chrome", KOPE_CHROMEDRIVER="/opt/chrome/chromedriver")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_a_missing_driver_that_cannot_be_installed_is_one_error_line(tmp_path):
    proc = _run(_bin(tmp_path, "chromium"))  # no chromedriver, no apt-get
    assert proc.returncode == 3
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: headless Chromium")
    assert "apt-get is not available" in lines[0] and "chromium-driver" in lines[0]
