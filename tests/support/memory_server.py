"""A real `kope serve` process for the tests: a free 127.0.0.1 port, its own registry, the session's Neo4j."""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from kope.db.ports import free_port
from kope.server.auth import issue_key
from kope.server.registry import Registry

KOPE = Path(sys.executable).with_name("kope")


@dataclass
class MemoryServer:
    registry_path: Path
    env: dict[str, str]
    args: tuple[str, ...] = ()
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    log_path: Path | None = None
    cafile: Path | None = None  # with --certfile: the certificate clients must trust

    @property
    def url(self) -> str:
        return f"{'https' if self.cafile else 'http'}://127.0.0.1:{self.port}"

    @property
    def registry(self) -> Registry:
        return Registry(self.registry_path)

    def key(self, team: str, scopes: str = "read,write") -> str:
        """A new key for ``team`` (created by the registry library, as `kope serve keys create` does)."""
        return issue_key(self.registry, team, scopes)[1]

    def start(self, timeout: float = 90.0) -> MemoryServer:
        self.log_path = self.registry_path.with_suffix(f".{self.port}.log")
        log = open(self.log_path, "ab")  # kept open by the child
        self.proc = subprocess.Popen(
            [str(KOPE), "serve", "--port", str(self.port), "--registry", str(self.registry_path), *self.args],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"kope serve exited with {self.proc.returncode}:\n{self.log()}")
            try:
                verify = ssl.create_default_context(cafile=str(self.cafile)) if self.cafile else True
                if httpx.get(self.url + "/health", timeout=2.0, verify=verify).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"kope serve did not answer /health within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path and self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no graceful shutdown, in-flight requests die with the process."""
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> int | None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode if self.proc else None


def memory_server(
    neo4j_server, tmp_path: Path, *args: str, data_dir: Path | None = None, cafile: Path | None = None
) -> MemoryServer:
    """A started server (the caller stops it) on the session's Neo4j."""
    env = neo4j_server.env(KOPE_DATA_DIR=str(data_dir or tmp_path / "server-data"), NO_COLOR="1")
    for name in ("KOPE_MEMORY_URL", "KOPE_MEMORY_TOKEN", "KOPE_NAMESPACE", "KOPE_TEAM"):
        env.pop(name, None)
    return MemoryServer(tmp_path / "registry.sqlite3", env, tuple(args), cafile=cafile).start()


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (PEM files), for TLS tests."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    certfile, keyfile = folder / "cert.pem", folder / "key.pem"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return certfile, keyfile


def client_env(neo4j_server, server: MemoryServer, token: str, data_dir: Path, **extra: str) -> dict[str, str]:
    """Environment for a `kope` client of ``server``: no Neo4j settings at all, only the URL and key."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOPE_NEO4J_")}
    env.pop("KOPE_NAMESPACE", None)
    env.update(
        KOPE_MEMORY_URL=server.url,
        KOPE_MEMORY_TOKEN=token,
        KOPE_DATA_DIR=str(data_dir),
        # a closed port: any attempt of the client to use Bolt would fail loudly
        KOPE_NEO4J_URI=f"bolt://127.0.0.1:{free_port()}",
        KOPE_NEO4J_PASSWORD="not-the-password",
        NO_COLOR="1",
        COLUMNS="200",
    )
    env.update(extra)
    return env
