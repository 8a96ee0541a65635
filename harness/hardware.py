"""Hardware fingerprint: CPU model, ISA features, cores, caches; the GPU when asked.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import json
import os
import platform
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from harness.record import GpuInfo, Hardware

# ISA features worth reporting (as named in /proc/cpuinfo flags / Features).
_X86_FEATURES = (
    "sse4_1",
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "bmi2",
    "avx512f",
    "avx512dq",
    "avx512cd",
    "avx512bw",
    "avx512vl",
    "avx512ifma",
    "avx512vbmi",
    "avx512_vbmi2",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "amx_fp16",
)
_ARM_FEATURES = ("asimd", "asimdhp", "asimddp", "fphp", "sve", "sve2", "sme", "bf16", "i8mm", "fp16")
_VENDORS = {"GenuineIntel": "intel", "AuthenticAMD": "amd", "HygonGenuine": "amd"}


def _read(path: str | Path) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def parse_cpuinfo(text: str) -> dict[str, str]:
    """The first processor block of /proc/cpuinfo as a dict (keys lower-cased)."""
    info: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if info.get("processor") is not None and len(info) > 2:
                break
            continue
        key, sep, value = line.partition(":")
        if sep:
            info.setdefault(key.strip().lower(), value.strip())
    return info


def _vendor(arch: str, info: dict[str, str]) -> str:
    """One of intel, amd, arm, nvidia, unknown (the ``vendor`` of the outcome record's hardware)."""
    if arch in ("aarch64", "arm64"):
        return "nvidia" if info.get("cpu implementer", "").lower() == "0x4e" else "arm"
    return _VENDORS.get(info.get("vendor_id", ""), "unknown")


def isa_features(arch: str, info: dict[str, str]) -> list[str]:
    if arch in ("x86_64", "amd64", "i686"):
        flags = set(info.get("flags", "").split())
        return [f for f in _X86_FEATURES if f in flags]
    if arch in ("aarch64", "arm64"):
        flags = set(info.get("features", "").split())
        found = [f for f in _ARM_FEATURES if f in flags]
        if "asimd" in flags:
            found.insert(0, "neon")
        return found
    if arch.startswith("riscv"):
        isa = info.get("isa", "")
        base = isa.split("_")[0]
        return ["rvv"] if len(base) > 4 and "v" in base[4:] else []
    return []


def cpu_class(arch: str, isa: list[str]) -> str:
    if arch in ("x86_64", "amd64"):
        if "avx512f" in isa:
            return "x86_64-avx512"
        if "avx2" in isa:
            return "x86_64-avx2"
        return "x86_64-sse"
    if arch in ("aarch64", "arm64"):
        return "aarch64-sve" if "sve" in isa else "aarch64-neon"
    if arch.startswith("riscv"):
        return f"{arch}-rvv" if "rvv" in isa else arch
    return arch or "unknown"


_CACHES_AS: contextvars.ContextVar[dict[str, int] | None] = contextvars.ContextVar("caches_as", default=None)


@contextlib.contextmanager
def caches_as(caches: Mapping[str, int]) -> Iterator[None]:
    """Within the block ``cache_sizes()`` answers ``caches`` (another machine's, e.g. a recorded space's): a
    template that reads the cache sizes (``tiles=auto``) renders the kernel that machine rendered."""
    token = _CACHES_AS.set(dict(caches))
    try:
        yield
    finally:
        _CACHES_AS.reset(token)


def cache_sizes(root: str | Path = "/sys/devices/system/cpu/cpu0/cache") -> dict[str, int]:
    """Bytes per cache level as seen by CPU 0: l1d, l1i, l2, l3 (absent levels omitted); inside ``caches_as``
    the caches it names."""
    pretended = _CACHES_AS.get()
    if pretended is not None:
        return dict(pretended)
    caches: dict[str, int] = {}
    for index in sorted(Path(root).glob("index*")):
        level, kind, size = _read(index / "level").strip(), _read(index / "type").strip(), _read(index / "size").strip()
        if not level or not size:
            continue
        name = f"l{level}" + {"Data": "d", "Instruction": "i"}.get(kind, "")
        caches[name] = _parse_size(size)
    return caches


def _parse_size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1024, "M": 1024**2, "G": 1024**3}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KMG" else text
    return int(digits) * scale


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def stable_id(prefix: str, fields: dict) -> str:
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
    return f"{prefix}-{digest[:8]}"


def cpu_fingerprint(
    cpuinfo_text: str | None = None,
    arch: str | None = None,
    cache_root: str | Path | None = None,
    cores: int | None = None,
) -> Hardware:
    """The CPU this process runs on (arguments exist for tests)."""
    arch = arch or platform.machine() or "unknown"
    info = parse_cpuinfo(cpuinfo_text if cpuinfo_text is not None else _read("/proc/cpuinfo"))
    isa = isa_features(arch, info)
    vendor = _vendor(arch, info)
    model = info.get("model name") or info.get("cpu model") or info.get("uarch") or platform.processor() or "unknown"
    caches = cache_sizes(cache_root) if cache_root is not None else cache_sizes()
    cores = cores if cores is not None else available_cores()
    key = {"arch": arch, "vendor": vendor, "model": model, "isa": isa, "cores": cores, "caches": caches}
    return Hardware(
        id=stable_id("cpu", key),
        class_=cpu_class(arch, isa),
        vendor=vendor,
        arch=arch,
        cpu_model=model,
        cores=cores,
        isa=isa,
        caches=caches,
        gpu=None,
    )


_FINAL = False  # True in a process that forks no more (a worker): it may initialise CUDA itself
PROBE_TIMEOUT_S = 120.0
DRIVER_NODES = ("/dev/nvidiactl", "/dev/dxg")  # the NVIDIA driver's control node; WSL's GPU node

# Run in a fresh interpreter by gpu_devices(): one JSON line, the devices torch sees (or why none).
_PROBE_SOURCE = r"""
import json, sys
try:
    import torch
    if torch.version.cuda is None or not torch.cuda.is_available():
        print(json.dumps({"devices": [], "why": "torch sees no CUDA device"})); sys.exit(0)
    out = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        clocks = {}
        try:
            clocks["sm_clock_mhz"] = int(torch.cuda.clock_rate(i))
        except Exception:
            pass
        try:
            import pynvml  # the NVML binding torch uses for clock_rate, when installed
            pynvml.nvmlInit()
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            clocks["mem_clock_mhz"] = int(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_MEM))
            clocks.setdefault("sm_clock_mhz", int(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)))
        except Exception:
            pass
        if len(clocks) < 2:  # no NVML binding: nvidia-smi reads the same counters
            try:
                import subprocess
                q = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem", "--format=csv,noheader,nounits",
                                    "-i", f"GPU-{p.uuid}" if getattr(p, "uuid", None) else str(i)], capture_output=True, text=True, timeout=20).stdout.split(",")
                clocks.setdefault("sm_clock_mhz", int(q[0])); clocks.setdefault("mem_clock_mhz", int(q[1]))
            except Exception:
                pass
        out.append({"name": p.name, "compute_capability": f"{p.major}.{p.minor}", "sms": p.multi_processor_count,
                    "memory_bytes": int(p.total_memory), **clocks})
    print(json.dumps({"devices": out}))
except Exception as exc:
    print(json.dumps({"devices": [], "why": f"{type(exc).__name__}: {exc}"}))
"""


def mark_final_process() -> None:
    """This process forks no more (a worker serving its role): it may initialise CUDA for its fingerprint."""
    global _FINAL
    _FINAL = True


def _cuda_initialized() -> bool:
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # a torch without CUDA support
        return False


def torch_has_cuda() -> bool:
    """Whether the installed torch was built with CUDA (read from its version, without touching a device)."""
    try:
        import torch
    except ImportError:
        return False
    return torch.version.cuda is not None


@functools.cache
def _probe(visible: str | None) -> tuple[tuple[GpuInfo, ...], str | None]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOPE_")}
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE_SOURCE], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, env=env
        )
        reply = json.loads((proc.stdout.strip().splitlines() or ["{}"])[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return (), f"the GPU probe failed: {exc}"
    devices = tuple(GpuInfo(**d) for d in reply.get("devices", []))
    return devices, (None if devices else reply.get("why") or (proc.stderr.strip()[-500:] or "no devices"))


def gpu_devices() -> tuple[list[GpuInfo], str | None]:
    """The CUDA devices this process would see, asked in a short-lived fresh interpreter (cached per process and
    ``CUDA_VISIBLE_DEVICES``); (devices, why none). This process initialises nothing: it may still fork."""
    if not torch_has_cuda():
        return [], "torch was built without CUDA"
    if sys.platform == "linux" and not any(os.path.exists(p) for p in DRIVER_NODES):
        return [], f"no NVIDIA driver device node ({', '.join(DRIVER_NODES)})"
    devices, why = _probe(os.environ.get("CUDA_VISIBLE_DEVICES"))
    return list(devices), why


def gpu_available() -> bool:
    """Whether a CUDA device can be used here, decided without initialising CUDA in this process."""
    if _FINAL or _cuda_initialized():
        import torch

        return bool(torch.cuda.is_available())
    return bool(gpu_devices()[0])


def gpu_info(device: int = 0) -> GpuInfo:
    """The CUDA device as torch sees it (raises if there is none): directly in a worker (``mark_final_process``)
    or once CUDA is initialised here anyway, else from the fresh-interpreter probe (``gpu_devices``)."""
    if not (_FINAL or _cuda_initialized()):
        devices, why = gpu_devices()
        if device >= len(devices):
            raise RuntimeError(f"no CUDA device {device}: {why or f'{len(devices)} visible'}")
        return devices[device]
    import torch

    props = torch.cuda.get_device_properties(device)
    clocks: dict[str, int] = {}
    try:
        clocks["sm_clock_mhz"] = int(torch.cuda.clock_rate(device))
    except Exception:  # NVML (pynvml) missing: the clocks stay unrecorded
        pass
    return GpuInfo(
        name=props.name,
        compute_capability=f"{props.major}.{props.minor}",
        sms=props.multi_processor_count,
        memory_bytes=int(props.total_memory),
        **clocks,
    )


def gpu_fingerprint(device: int = 0) -> Hardware:
    """Host CPU fields plus the GPU; ``class`` and ``id`` describe the GPU (``nvidia-sm90``)."""
    host = cpu_fingerprint()
    gpu = gpu_info(device)
    sm = gpu.compute_capability.replace(".", "")
    key = {"gpu": gpu.name, "cc": gpu.compute_capability, "sms": gpu.sms, "memory": gpu.memory_bytes}
    return Hardware(
        id=stable_id("gpu", key),
        class_=f"nvidia-sm{sm}",
        vendor="nvidia",
        arch=host.arch,
        cpu_model=host.cpu_model,
        cores=host.cores,
        isa=host.isa,
        caches=host.caches,
        gpu=gpu,
    )
