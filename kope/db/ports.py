"""Is a TCP port free on 127.0.0.1, and if not, which process holds it?"""

from __future__ import annotations

import os
import socket
from pathlib import Path


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def port_answers(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10:
                continue
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(inode)
    return inodes


def port_owner(port: int) -> str | None:
    """'pid N (command)' of the process listening on ``port``, when it can be seen (Linux)."""
    inodes = _listening_inodes(port)
    if not inodes:
        return None
    targets = {f"socket:[{inode}]" for inode in inodes}
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            for fd in (pid_dir / "fd").iterdir():
                if os.readlink(fd) in targets:
                    return f"pid {pid_dir.name} ({describe_pid(int(pid_dir.name))})"
        except OSError:
            continue
    return "a process this user cannot inspect"


def describe_pid(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "unknown command"
    parts = [p.decode(errors="replace") for p in raw.split(b"\0") if p]
    if not parts:
        return "unknown command"
    if "org.neo4j.server.CommunityEntryPoint" in parts:
        home = next((p.split("=", 1)[1] for p in parts if p.startswith("--home-dir=")), "?")
        return f"a Neo4j server with home {home}"
    text = " ".join([os.path.basename(parts[0])] + parts[1:])
    return text if len(text) <= 80 else text[:77] + "..."
