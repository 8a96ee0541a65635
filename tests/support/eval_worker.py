"""A real evaluation worker process (`python -m harness serve`) for the tests: any free 127.0.0.1 port, its own cache."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

KEY = "test-worker-key-0123456789"


@dataclass
class EvalWorker:
    folder: Path
    key: str = KEY
    proc: subprocess.Popen | None = None
    port: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.folder / "worker.log"

    def start(self, timeout: float = 300.0) -> EvalWorker:
        self.folder.mkdir(parents=True, exist_ok=True)
        port_file = self.folder / "port"
        port_file.unlink(missing_ok=True)
        env = {**os.environ, "KOPE_WORKER_KEY": self.key}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "harness", "serve", "--port", "0", "--devices", "none"]
                + ["--cache-dir", str(self.folder / "cache"), "--port-file", str(port_file)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the worker exited with {self.proc.returncode}:\n{self.log()}")
            if port_file.is_file() and port_file.read_text().strip():
                self.port = int(port_file.read_text())
                return self
            time.sleep(0.2)
        raise AssertionError(f"the worker did not start within {timeout} s:\n{self.log()}")

    def health(self) -> dict:
        response = httpx.get(self.url + "/health", headers={"Authorization": f"Bearer {self.key}"}, timeout=30)
        response.raise_for_status()
        return response.json()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL the service: no graceful shutdown; its evaluator processes see their parent gone and end."""
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()
