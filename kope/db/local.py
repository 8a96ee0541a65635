"""A real Neo4j Community 5.26 server on any machine with Java 17+ and Maven.

Layout (``config.cache_dir`` is shared by every data dir; ``config.data_dir``
holds one server's state):

    <cache_dir>/neo4j-dist/<version>+browser-<bv>/lib/*.jar   fetched once by Maven
    <data_dir>/neo4j/conf/neo4j.conf                          written on every start
    <data_dir>/neo4j/data/ logs/ run/server.json              database, logs, pid record
    <data_dir>/neo4j/password                                 generated password (mode 0600)

The server is started directly with ``org.neo4j.server.CommunityEntryPoint``
(no Neo4j launcher script exists in Maven artifacts), so heap settings are
passed as JVM flags rather than read from neo4j.conf.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kope.config import KopeConfig
from kope.db.ports import port_answers, port_is_free, port_owner
from kope.db.tools import find_java, find_maven
from kope.errors import (
    DatabaseAuthError,
    KopeError,
    PortInUseError,
    ProvisionError,
    ServerStartError,
    UsageError,
)

ENTRY_POINT = "org.neo4j.server.CommunityEntryPoint"
ADMIN_ENTRY_POINT = "org.neo4j.server.startup.Neo4jAdminCommand"
# The flags Neo4j's own launcher passes; without them some JDKs refuse reflective access.
JVM_FLAGS = [
    "-XX:+UseG1GC",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:-OmitStackTraceInFastThrow",
    "-Djdk.nio.maxCachedBufferSize=1024",
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dfile.encoding=UTF-8",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--enable-native-access=ALL-UNNAMED",
]
MAVEN_TIMEOUT_S = 1800

Progress = Callable[[str], None]


def _quiet(_message: str) -> None:
    pass


@dataclass
class ServerRecord:
    """What ``run/server.json`` remembers about the server we started."""

    pid: int
    bolt_port: int
    http_port: int
    version: str
    home: str
    started_at: float


@dataclass
class ServerStatus:
    running: bool
    managed: bool = True
    pid: int | None = None
    version: str | None = None
    edition: str | None = None
    bolt_uri: str | None = None
    http_url: str | None = None
    browser_url: str | None = None
    data_dir: str | None = None
    log_file: str | None = None
    nodes: int | None = None
    relationships: int | None = None
    reused: bool = False
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) is not a running server.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return True


class LocalNeo4j:
    """Provision, start, stop and inspect the local server for one ``KopeConfig``."""

    def __init__(self, config: KopeConfig, progress: Progress = _quiet) -> None:
        self.config = config
        self.progress = progress
        self.settings = config.server

    # -- paths --------------------------------------------------------------------------
    @property
    def dist_dir(self) -> Path:
        s = self.settings
        return self.config.cache_dir / "neo4j-dist" / f"{s.version}+browser-{s.browser_version}"

    @property
    def lib_dir(self) -> Path:
        return self.dist_dir / "lib"

    @property
    def home(self) -> Path:
        return self.config.neo4j_home

    @property
    def conf_dir(self) -> Path:
        return self.home / "conf"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def log_file(self) -> Path:
        return self.logs_dir / "neo4j.log"

    @property
    def console_log(self) -> Path:
        return self.logs_dir / "console.log"

    @property
    def record_file(self) -> Path:
        return self.home / "run" / "server.json"

    @property
    def initialized_marker(self) -> Path:
        return self.home / "run" / "initialized"

    # -- provisioning -------------------------------------------------------------------
    def is_provisioned(self) -> bool:
        return (self.dist_dir / ".complete").is_file() and any(self.lib_dir.glob("neo4j-*.jar"))

    def _pom(self) -> str:
        s = self.settings
        return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.kope</groupId>
  <artifactId>kope-neo4j-server</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.neo4j</groupId><artifactId>neo4j</artifactId><version>{s.version}</version></dependency>
    <dependency><groupId>org.neo4j.client</groupId><artifactId>neo4j-browser</artifactId><version>{s.browser_version}</version></dependency>
  </dependencies>
</project>
"""

    def provision(self) -> Path:
        """Fetch the server and Browser jars with Maven into the versioned cache (once)."""
        if self.is_provisioned():
            return self.lib_dir
        self.dist_dir.mkdir(parents=True, exist_ok=True)
        # one fetch at a time: servers for several data dirs may be started at once (scripts/test.sh starts
        # one per pytest worker), and they share this cache and Maven's local repository
        with open(self.dist_dir / ".provision.lock", "w", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.is_provisioned():
                return self.lib_dir
            return self._fetch()

    def _fetch(self) -> Path:
        maven = find_maven()
        s = self.settings
        self.progress(
            f"fetching Neo4j {s.version} and Neo4j Browser {s.browser_version} with Maven (first start only, ~140 MB)"
        )
        staging = self.dist_dir / f"lib.partial-{os.getpid()}"
        pom = self.dist_dir / "pom.xml"
        pom.write_text(self._pom(), encoding="utf-8")
        cmd = [
            maven.path,
            "-B",
            "-q",
            "-f",
            str(pom),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={staging}",
        ]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=MAVEN_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            raise ProvisionError(f"Maven did not finish fetching Neo4j within {MAVEN_TIMEOUT_S} s") from None
        if proc.returncode != 0:
            errors = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "ERROR" in ln]
            first = errors[0].replace("[ERROR]", "").strip() if errors else (proc.stderr or proc.stdout).strip()[-300:]
            raise ProvisionError(
                f"Maven could not fetch Neo4j {s.version}: {first[:400]}",
                hint="check that Maven Central (or the mirror in ~/.m2/settings.xml) is reachable, "
                "or point KOPE at an existing server with KOPE_NEO4J_URI",
            )
        if not any(staging.glob("neo4j-*.jar")):
            raise ProvisionError(f"Maven finished but {staging} holds no Neo4j jars")
        if self.lib_dir.exists():
            import shutil

            shutil.rmtree(self.lib_dir)
        staging.rename(self.lib_dir)
        (self.dist_dir / ".complete").write_text(f"{s.version} {s.browser_version}\n", encoding="utf-8")
        return self.lib_dir

    # -- configuration ------------------------------------------------------------------
    def conf_text(self) -> str:
        s = self.settings
        lines = {
            "server.default_listen_address": "127.0.0.1",
            "server.default_advertised_address": "127.0.0.1",
            "server.bolt.enabled": "true",
            "server.bolt.listen_address": f"127.0.0.1:{s.bolt_port}",
            "server.bolt.advertised_address": f"127.0.0.1:{s.bolt_port}",
            "server.http.enabled": "true",
            "server.http.listen_address": f"127.0.0.1:{s.http_port}",
            "server.http.advertised_address": f"127.0.0.1:{s.http_port}",
            "server.https.enabled": "false",
            "server.memory.pagecache.size": s.pagecache,
            "server.directories.data": str(self.home / "data"),
            "server.directories.logs": str(self.logs_dir),
            "server.directories.run": str(self.home / "run"),
            "server.directories.import": str(self.home / "import"),
            "dbms.security.auth_enabled": "true",
            "dbms.usage_report.enabled": "false",
            "db.tx_log.rotation.retention_policy": "2 days 500M",
            # KOPE's Browser guide (kope browser) is served from 127.0.0.1.
            "browser.remote_content_hostname_whitelist": "localhost,127.0.0.1",
            "browser.post_connect_cmd": "",
        }
        header = "# Written by `kope db start`; edits are overwritten on the next start.\n"
        return header + "".join(f"{k}={v}\n" for k, v in lines.items() if v != "")

    def write_conf(self) -> Path:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        for sub in ("data", "logs", "run", "import"):
            (self.home / sub).mkdir(parents=True, exist_ok=True)
        path = self.conf_dir / "neo4j.conf"
        path.write_text(self.conf_text(), encoding="utf-8")
        return path

    # -- password -----------------------------------------------------------------------
    def _initial_password(self) -> str:
        if self.config.neo4j.password:
            return self.config.neo4j.password
        existing = self.config.neo4j_password()
        if existing:
            return existing
        password = secrets.token_urlsafe(18)
        while password.startswith("-"):  # neo4j-admin would read it as an option (and print its usage)
            password = secrets.token_urlsafe(18)
        self.config.password_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.config.password_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(password + "\n")
        os.chmod(self.config.password_file, 0o600)
        return password

    def _set_initial_password(self, java: str) -> None:
        password = self._initial_password()
        env = dict(os.environ, NEO4J_HOME=str(self.home), NEO4J_CONF=str(self.conf_dir))
        cmd = [java, "-cp", f"{self.lib_dir}/*", ADMIN_ENTRY_POINT, "dbms", "set-initial-password", password]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)
        if proc.returncode != 0:
            # The message may echo the command line; never print the password.
            detail = (proc.stderr or proc.stdout).replace(password, "********").strip().splitlines()
            raise ServerStartError(
                f"could not set the initial Neo4j password: {detail[-1] if detail else proc.returncode}"
            )

    # -- process record -----------------------------------------------------------------
    def read_record(self) -> ServerRecord | None:
        try:
            data = json.loads(self.record_file.read_text(encoding="utf-8"))
            return ServerRecord(**data)
        except (FileNotFoundError, json.JSONDecodeError, TypeError):
            return None

    def running_record(self) -> ServerRecord | None:
        """The record of a live server started from this data dir, else None (stale records go)."""
        record = self.read_record()
        if record is None:
            return None
        cmdline = self._cmdline(record.pid)
        if _pid_alive(record.pid) and ENTRY_POINT in cmdline and f"--home-dir={self.home}" in cmdline:
            return record
        self.record_file.unlink(missing_ok=True)
        return None

    @staticmethod
    def _cmdline(pid: int) -> str:
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return ""

    # -- lifecycle ----------------------------------------------------------------------
    def start(self) -> ServerStatus:
        """Start (or reuse) the server and wait until Bolt answers with our credentials."""
        if not self.config.uses_local_server:
            raise UsageError(
                f"KOPE_NEO4J_URI is set ({self.config.neo4j_uri}): KOPE uses that server and does not start its own",
                hint="unset KOPE_NEO4J_URI to use the local server",
            )
        record = self.running_record()
        if record is not None:
            self.progress(f"Neo4j is already running (pid {record.pid}); reusing it")
            self._wait_for_bolt(record.pid, record.bolt_port)
            status = self.status()
            status.reused = True
            return status

        java = find_java()
        s = self.settings
        for name, port in (("Bolt", s.bolt_port), ("HTTP", s.http_port)):
            if not port_is_free(port):
                owner = port_owner(port)
                key = "KOPE_NEO4J_BOLT_PORT" if name == "Bolt" else "KOPE_NEO4J_HTTP_PORT"
                raise PortInUseError(
                    f"{name} port {port} is already in use" + (f" by {owner}" if owner else ""),
                    hint=f"stop that process or choose another port with {key}",
                )
        lib = self.provision()
        self.write_conf()
        first_start = not self.initialized_marker.exists()
        if first_start:
            self.progress("setting the initial password (first start of this data dir)")
            self._set_initial_password(java.path)

        self.progress(f"starting Neo4j {s.version} on bolt://127.0.0.1:{s.bolt_port}")
        self.console_log.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            java.path,
            f"-Xms{s.heap}",
            f"-Xmx{s.heap}",
            *JVM_FLAGS,
            "-cp",
            f"{lib}/*",
            ENTRY_POINT,
            f"--home-dir={self.home}",
            f"--config-dir={self.conf_dir}",
        ]
        with open(self.console_log, "wb") as console:
            proc = subprocess.Popen(
                cmd,
                stdout=console,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.home,
                start_new_session=True,
            )
        record = ServerRecord(proc.pid, s.bolt_port, s.http_port, s.version, str(self.home), time.time())
        self.record_file.parent.mkdir(parents=True, exist_ok=True)
        self.record_file.write_text(json.dumps(asdict(record)), encoding="utf-8")
        try:
            self._wait_for_bolt(proc.pid, s.bolt_port, child=proc)
        except KopeError:
            self._kill(proc.pid, graceful_timeout=5)
            self.record_file.unlink(missing_ok=True)
            raise
        self.initialized_marker.write_text(f"{s.version}\n", encoding="utf-8")
        return self.status()

    def _wait_for_bolt(self, pid: int, port: int, child: subprocess.Popen[bytes] | None = None) -> None:
        from kope.db.client import GraphClient

        deadline = time.monotonic() + self.settings.start_timeout
        last_error: KopeError | None = None
        while time.monotonic() < deadline:
            exited = child.poll() is not None if child is not None else not _pid_alive(pid)
            if exited:
                raise ServerStartError(self._failure_message("Neo4j exited during start-up"))
            if port_answers(port):
                client = GraphClient.from_config(self.config, connection_timeout=5.0)
                try:
                    client.verify()
                    return
                except DatabaseAuthError:
                    raise
                except KopeError as exc:
                    last_error = exc
                finally:
                    client.close()
            time.sleep(0.5)
        why = f"Neo4j did not answer on Bolt port {port} within {self.settings.start_timeout:.0f} s"
        if last_error is not None:
            why += f" ({last_error.message})"
        raise ServerStartError(self._failure_message(why))

    def _failure_message(self, why: str) -> str:
        tail = self.log_tail(15)
        where = self.log_file if self.log_file.exists() else self.console_log
        text = f"{why}; see {where}"
        if tail:
            text += "\n  last log lines:\n" + "\n".join("    " + ln for ln in tail)
        return text

    def stop(self) -> bool:
        """Stop the server we started: SIGTERM, then SIGKILL after the timeout. False if none ran."""
        record = self.running_record()
        if record is None:
            return False
        self.progress(f"stopping Neo4j (pid {record.pid})")
        self._kill(record.pid, graceful_timeout=self.settings.stop_timeout)
        self.record_file.unlink(missing_ok=True)
        return True

    def _kill(self, pid: int, graceful_timeout: float) -> None:
        for sig, wait in ((signal.SIGTERM, graceful_timeout), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                return
            except PermissionError:
                os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                try:
                    waited, _ = os.waitpid(pid, os.WNOHANG)
                    if waited == pid:
                        return
                except ChildProcessError:
                    pass
                if not _pid_alive(pid):
                    return
                time.sleep(0.2)
            if sig == signal.SIGTERM:
                self.progress(f"Neo4j did not stop within {wait:.0f} s; killing it")

    # -- inspection ---------------------------------------------------------------------
    def status(self) -> ServerStatus:
        from kope.db.client import GraphClient

        if not self.config.uses_local_server:
            return self._external_status()
        s = self.settings
        record = self.running_record()
        status = ServerStatus(
            running=record is not None,
            pid=record.pid if record else None,
            data_dir=str(self.config.data_dir),
            log_file=str(self.log_file),
        )
        if record is None:
            status.version = s.version if self.is_provisioned() else None
            if not self.is_provisioned():
                status.notes.append("not provisioned yet: `kope db start` fetches it")
            return status
        status.bolt_uri = f"bolt://127.0.0.1:{record.bolt_port}"
        status.http_url = f"http://127.0.0.1:{record.http_port}/"
        status.browser_url = f"http://127.0.0.1:{record.http_port}/browser/"
        status.version = record.version
        with GraphClient.from_config(self.config, connection_timeout=5.0) as client:
            info = client.server_info()
            status.version = info.get("version", record.version)
            status.edition = info.get("edition")
            counts = client.counts()
        status.nodes, status.relationships = counts["nodes"], counts["relationships"]
        return status

    def _external_status(self) -> ServerStatus:
        """Status of a server KOPE does not manage (KOPE_NEO4J_URI): connect and count."""
        from kope.db.client import GraphClient

        status = ServerStatus(running=True, managed=False, bolt_uri=self.config.neo4j_uri)
        status.notes.append("external server (KOPE_NEO4J_URI): KOPE does not start or stop it")
        with GraphClient.from_config(self.config, connection_timeout=5.0) as client:
            info = client.server_info()
            counts = client.counts()
        status.version, status.edition = info.get("version"), info.get("edition")
        status.nodes, status.relationships = counts["nodes"], counts["relationships"]
        return status

    def log_tail(self, lines: int = 50) -> list[str]:
        """The last lines of neo4j.log, preceded by any JVM output captured in console.log."""
        console = [ln for ln in _read_lines(self.console_log) if ln.strip()]
        main = [ln for ln in _read_lines(self.log_file) if ln.strip()]
        if not main:
            return console[-lines:]
        return (console[-5:] + main)[-lines:] if console else main[-lines:]


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return []
