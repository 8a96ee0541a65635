"""``kope doctor``: what this machine has and lacks for KOPE, each with its fix."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from kope.config import KopeConfig
from kope.db.tools import docker_engine, find_java, find_maven
from kope.errors import KopeError

Level = Literal["ok", "missing", "optional", "info"]


@dataclass
class Check:
    name: str
    level: Level  # ok: present; missing: required and absent; optional: absent but not required; info
    detail: str
    fix: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_python() -> Check:
    version = platform.python_version()
    # the interpreter actually running may be older than the declared minimum (python -m kope.doctor)
    if sys.version_info >= (3, 11):  # noqa: UP036 - this check is for interpreters below requires-python
        return Check("Python", "ok", f"{version} ({sys.executable})")
    return Check("Python", "missing", version, "use Python 3.11 or newer")


def check_torch() -> list[Check]:
    try:
        import torch
    except ImportError:
        return [Check("PyTorch", "missing", "not installed", "pip install torch")]
    checks = [Check("PyTorch", "ok", f"{torch.__version__}, {torch.get_num_threads()} CPU threads")]
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name(0)
        cap = ".".join(map(str, torch.cuda.get_device_capability(0)))
        checks.append(Check("GPU (CUDA)", "ok", f"{name}, compute capability {cap}"))
    else:
        checks.append(
            Check(
                "GPU (CUDA)",
                "optional",
                "no GPU visible: the cpu target works; triton runs in the interpreter (no valid timings)",
                "run on a machine with an NVIDIA GPU for the triton and cuda targets",
            )
        )
    return checks


def check_triton() -> Check:
    try:
        import triton
    except ImportError:
        return Check("Triton", "optional", "not installed", "pip install triton")
    return Check("Triton", "ok", triton.__version__)


def check_cxx() -> Check:
    compiler = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++") or shutil.which("clang++")
    fix = "install g++ (e.g. `apt-get install g++`) for the cpu target"
    if not compiler:
        return Check("C++ compiler + OpenMP", "missing", "no C++ compiler found", fix)
    source = "#include <omp.h>\nint main(){int n=0;\n#pragma omp parallel reduction(+:n)\nn+=1;\nreturn n>0?0:1;}\n"
    with tempfile.TemporaryDirectory(prefix="kope-doctor-") as tmp:
        src, exe = Path(tmp, "t.cpp"), Path(tmp, "t")
        src.write_text(source)
        try:
            proc = subprocess.run(
                [compiler, "-fopenmp", "-O2", str(src), "-o", str(exe)], capture_output=True, text=True, timeout=60
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return Check("C++ compiler + OpenMP", "missing", f"{compiler}: {exc}", fix)
        if proc.returncode != 0:
            return Check(
                "C++ compiler + OpenMP",
                "missing",
                f"{compiler} cannot build OpenMP code",
                "install the compiler's OpenMP runtime (libgomp / libomp)",
            )
    try:
        version = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, timeout=20
        ).stdout.splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        version = compiler
    return Check("C++ compiler + OpenMP", "ok", version)


def check_sandbox() -> Check:
    """The OS sandbox candidates run in (``harness.sandbox``); without it they are refused unless opted out."""
    from kope.boundary import sandbox_report

    status = sandbox_report()
    env = status.env
    layers = ", ".join(f"{k} {v}" for k, v in status.layers.items())
    if status.available:
        if status.opted_out:
            return Check(
                "Candidate sandbox",
                "optional",
                f"works here but switched off ({env}=off): candidates run without it",
                f"unset {env} to run candidates (untrusted code) in the sandbox",
            )
        return Check("Candidate sandbox", "ok", layers)
    if status.opted_out:
        return Check(
            "Candidate sandbox",
            "optional",
            f"unavailable ({status.reason}); switched off ({env}=off): candidates run without it",
            "allow unprivileged user namespaces and install libseccomp2 (with pyseccomp) to sandbox candidates",
        )
    return Check(
        "Candidate sandbox",
        "missing",
        f"unavailable: {status.reason}; candidates are refused [{layers}]",
        "allow unprivileged user namespaces (kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0) and "
        f"install libseccomp2 (and pyseccomp); or set {env}=off to run candidates (untrusted code) without it",
    )


def check_native_probe() -> Check:
    """The harness's native probe (perf events sampling the candidate's timed calls, ``harness.native_probe``)."""
    from kope.boundary import native_probe_unavailable

    why = native_probe_unavailable()
    if why is None:
        return Check("Native probe (perf events)", "ok", "samples where candidates spend their timed calls")
    return Check(
        "Native probe (perf events)",
        "optional",
        f"unavailable: {why}; a candidate that reaches the reference's work below Python (C++ calling libtorch, "
        "a helper thread with dispatch modes off) is not caught by this layer",
        "allow perf events for this user: sysctl kernel.perf_event_paranoid=2 (or grant CAP_PERFMON)",
    )


def check_sandbox_targets() -> list[Check]:
    """Which sandbox layers hold for each target on this machine (the GPU targets open the driver's device nodes
    and drop the address-space limit; Triton on a GPU also runs its compilers in the worker)."""
    from kope.boundary import sandbox_target_layers

    checks = []
    for target, layers in sandbox_target_layers().items():
        weakened = [k for k, v in layers.items() if not v.startswith("holds")]
        detail = "; ".join(f"{k}: {v}" for k, v in layers.items())
        checks.append(
            Check(
                f"Sandbox layers ({target})",
                "ok" if not weakened else "info",
                detail,
                None
                if not weakened
                else f"not every layer holds as on cpu: {', '.join(weakened)} (docs/harness-workers.md)",
            )
        )
    return checks


def _tool_check(name: str, finder: Callable[[], Any], required_for: str) -> Check:
    try:
        tool = finder()
    except KopeError as exc:
        return Check(name, "optional", exc.message, exc.hint or required_for)
    return Check(name, "ok", f"{tool.version} ({tool.path})")


def check_docker() -> Check:
    ok, detail = docker_engine()
    if ok:
        return Check("Docker engine", "ok", f"server {detail}")
    return Check(
        "Docker engine",
        "optional",
        detail,
        "not needed: `kope db start` uses Java + Maven; install Docker for `--docker`",
    )


def check_neo4j(config: KopeConfig) -> Check:
    from kope.db.client import GraphClient

    where = config.neo4j_uri
    try:
        with GraphClient.from_config(config, connection_timeout=3.0) as client:
            client.verify()
            info = client.server_info()
    except KopeError as exc:
        fix = (
            "run `kope db start`" if config.uses_local_server else (exc.hint or "check KOPE_NEO4J_URI and the password")
        )
        return Check("Neo4j", "missing", f"{where}: {exc.message}", fix)
    return Check(
        "Neo4j", "ok", f"{info.get('version')} {info.get('edition')} at {where} (database {config.neo4j.database})"
    )


def check_llm(config: KopeConfig) -> Check:
    llm = config.llm
    if llm.configured:
        where = llm.base_url or "the OpenAI API"
        return Check("LLM endpoint", "ok", f"model {llm.model} at {where}")
    return Check(
        "LLM endpoint",
        "optional",
        "not configured: the offline proposer is used",
        "set KOPE_LLM_MODEL and KOPE_LLM_BASE_URL (and KOPE_LLM_API_KEY if the endpoint needs one)",
    )


def run_checks(config: KopeConfig) -> list[Check]:
    checks = [check_python(), *check_torch(), check_triton(), check_cxx(), check_sandbox(), *check_sandbox_targets()]
    checks.append(check_native_probe())
    java = _tool_check("Java 17+", find_java, "needed for the local Neo4j server")
    if config.uses_local_server and java.level != "ok":
        java.level = "missing"
    maven = _tool_check("Maven", find_maven, "needed once, to fetch the local Neo4j server")
    checks += [java, maven, check_docker(), check_neo4j(config), check_llm(config)]
    return checks
