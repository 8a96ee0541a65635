"""``python -m harness serve``: the command line of the worker service (``kope worker`` passes its arguments here).

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import subprocess
import sys
from pathlib import Path

from harness.errors import HarnessError, OptionsError

DESCRIPTION = "Evaluate candidates sent by kope (--evaluator http://HOST:PORT) on this host's devices."
DEFAULT_PORT = 8700
KEY_ENV = "KOPE_WORKER_KEY"
MIN_KEY_LENGTH = 16


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``serve`` as a subcommand of ``python -m harness``."""
    p = sub.add_parser(
        "serve",
        help="run the evaluation service on this host (a remote worker for kope --evaluator URL)",
        description=DESCRIPTION,
    )
    configure(p)
    return p


def main(argv: list[str], prog: str) -> int:
    """The service as a command of its own (``kope worker``): one ``error:`` line and exit 2 for a bad option."""
    parser = argparse.ArgumentParser(prog=prog, description=DESCRIPTION)
    configure(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this host only)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free port)")
    p.add_argument("--key", default=None, help=f"the bearer key clients must send (default: ${KEY_ENV})")
    p.add_argument(
        "--devices",
        default="auto",
        help="GPUs to serve: auto (every visible GPU), none, or indices such as 0,1 (the CPU is always served)",
    )
    p.add_argument("--cpu-slots", type=int, default=1, help="evaluations admitted at once on the CPU (default 1)")
    p.add_argument(
        "--gpu-slots",
        type=int,
        default=2,
        help="evaluations admitted at once per GPU: one runs and times, the others load and compile (default 2)",
    )
    p.add_argument("--cache-dir", default=None, help="this worker's compile and extension caches and scratch files")
    p.add_argument("--max-request-mb", type=float, default=16.0, help="largest request accepted (default 16 MiB)")
    p.add_argument("--max-queue", type=int, default=32, help="requests waiting at most; more are refused as busy")
    p.add_argument(
        "--eval-timeout", type=float, default=7200.0, help="an evaluator process silent this long is killed (s)"
    )
    p.add_argument(
        "--probe-command",
        default=None,
        help="extra device check run after a sticky error (shell command; exit 0 = healthy; $KOPE_PROBE_DEVICE)",
    )
    p.add_argument("--port-file", default=None, help="write the port here once the worker answers (for scripts)")
    p.add_argument("--tls-cert", default=None, help="serve HTTPS with this certificate (PEM)")
    p.add_argument("--tls-key", default=None, help="the certificate's private key (PEM)")
    p.add_argument("--log-level", default="warning", help="uvicorn's log level (default warning)")


def _gpus(spec: str) -> list[int]:
    spec = spec.strip().lower()
    if spec == "none":
        return []
    if spec == "auto":
        code = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
        try:
            proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
            return list(range(int(proc.stdout.strip() or 0)))
        except (subprocess.TimeoutExpired, ValueError):
            return []
    try:
        indices = [int(part) for part in spec.split(",") if part.strip()]
    except ValueError:
        raise OptionsError(f"--devices takes auto, none or GPU indices such as 0,1 (got {spec!r})") from None
    if not indices or any(i < 0 for i in indices) or len(set(indices)) != len(indices):
        raise OptionsError(f"--devices takes distinct non-negative GPU indices such as 0,1 (got {spec!r})")
    return indices


def _check(args: argparse.Namespace) -> str:
    key = args.key if args.key is not None else os.environ.get(KEY_ENV, "")
    os.environ.pop(KEY_ENV, None)  # no process this service starts inherits it
    erase_from_process_block(KEY_ENV.encode() + b"=", "env")  # nor does /proc/<this pid>/environ show it
    if key and args.key is not None:
        erase_from_process_block(key.encode(), "arg")  # nor /proc/<this pid>/cmdline
    if not key:
        raise OptionsError(
            f"no worker key: set {KEY_ENV} (or --key)",
            hint="make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'",
        )
    if len(key) < MIN_KEY_LENGTH:
        raise OptionsError(f"the worker key must be at least {MIN_KEY_LENGTH} characters long")
    if not 0 <= args.port <= 65535:
        raise OptionsError(f"--port must be 0 to 65535 (got {args.port})")
    for name in ("cpu_slots", "gpu_slots", "max_queue"):
        if getattr(args, name) < 1:
            raise OptionsError(f"--{name.replace('_', '-')} must be at least 1")
    if args.max_request_mb <= 0 or args.eval_timeout <= 0:
        raise OptionsError("--max-request-mb and --eval-timeout must be positive")
    if bool(args.tls_cert) != bool(args.tls_key):
        raise OptionsError("--tls-cert and --tls-key go together")
    for path in filter(None, (args.tls_cert, args.tls_key)):
        if not Path(path).is_file():
            raise OptionsError(f"TLS file not found: {path}")
    return key


def erase_from_process_block(prefix: bytes, block: str) -> bool:
    """Overwrite with NULs every entry starting with ``prefix`` in this process's initial environment
    (``block="env"``), or holding it in its argument block (``"arg"``): the memory ``/proc/PID/environ`` and ``/proc/PID/cmdline``
    show to any process of the same user (``os.environ.pop`` only unlinks the variable; its bytes stay).
    True when something was erased; False where the block cannot be found (not Linux)."""
    import ctypes

    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        first = 45 if block == "arg" else 47  # fields 48/49: arg_start/arg_end; 50/51: env_start/env_end
        start, end = int(fields[first]), int(fields[first + 1])
    except (OSError, IndexError, ValueError):
        return False
    if not 0 < start < end:
        return False
    erased, offset = False, 0
    for entry in ctypes.string_at(start, end - start).split(b"\0"):
        if entry.startswith(prefix) if block == "env" else prefix in entry:  # an argument: --key=KEY too
            ctypes.memset(start + offset, 0, len(entry))
            erased = True
        offset += len(entry) + 1
    return erased


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OptionsError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    return sock


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from harness.serve.app import create_app
    from harness.serve.devices import Devices

    key = _check(args)
    gpus = _gpus(args.devices)
    cache = Path(args.cache_dir) if args.cache_dir else _default_cache(args.port)
    cache.mkdir(parents=True, exist_ok=True)
    sock = _bind(args.host, args.port)
    port = sock.getsockname()[1]
    scheme = "https" if args.tls_cert else "http"
    if not _loopback(args.host) and not args.tls_cert:
        print(
            f"kope worker: WARNING: listening on {args.host} without TLS: the key and the candidates cross the "
            "network in clear text (use --tls-cert/--tls-key, or an SSH tunnel to 127.0.0.1)",
            file=sys.stderr,
        )
    devices = Devices(
        gpus,
        cache,
        cpu_slots=args.cpu_slots,
        gpu_slots=args.gpu_slots,
        probe_command=args.probe_command,
        eval_timeout_s=args.eval_timeout,
    )
    try:
        devices.start()
        app = create_app(devices, key, max_request_bytes=int(args.max_request_mb * (1 << 20)), max_queue=args.max_queue)
        config = uvicorn.Config(
            app,
            log_level=args.log_level,
            access_log=False,
            ssl_certfile=args.tls_cert,
            ssl_keyfile=args.tls_key,
            timeout_graceful_shutdown=10,
        )
        states = ", ".join(f"{d.name} ({d.state}: {', '.join(d.targets) or '-'})" for d in devices.devices)
        print(
            f"kope worker: listening on {scheme}://{args.host}:{port}; devices: {states}; cache {cache}",
            file=sys.stderr,
        )
        if args.port_file:
            Path(args.port_file).write_text(f"{port}\n", encoding="utf-8")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        devices.close()
        sock.close()
    return 0


def _default_cache(port: int) -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kope" / "worker" / (f"port-{port}" if port else "any-port")
