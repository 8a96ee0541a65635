"""``python -m harness.serve.probe cpu|cuda``: check a device in a fresh process and report it.

docs/harness.md, "Module notes".
"""

from __future__ import annotations

import json
import sys


def _check_cpu() -> None:
    import torch

    x = torch.arange(1 << 16, dtype=torch.float64)
    if float((x * 2).sum()) != float((1 << 16) * ((1 << 16) - 1)):
        raise RuntimeError("a small CPU computation gave a wrong result")


def _check_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("torch sees no CUDA device")
    x = torch.arange(1 << 20, dtype=torch.float64, device="cuda")
    total = float((x * 2).sum().cpu())
    torch.cuda.synchronize()
    if total != float((1 << 20) * ((1 << 20) - 1)):
        raise RuntimeError("a small GPU computation gave a wrong result")


def report(kind: str) -> dict:
    from harness import hardware

    if kind == "cpu":
        _check_cpu()
        targets = ["cpu"]
        try:
            import triton  # noqa: F401 - the Triton interpreter serves the triton target without a GPU

            targets.append("triton")
        except ImportError:
            pass
        cpu = hardware.cpu_fingerprint().to_dict()
        return {"targets": targets, "hardware": {t: cpu for t in targets}}
    if kind == "cuda":
        _check_cuda()
        gpu = hardware.gpu_fingerprint(0).to_dict()
        return {"targets": ["cuda", "triton"], "hardware": {"cuda": gpu, "triton": gpu}}
    raise ValueError(f"unknown device kind {kind!r} (cpu or cuda)")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m harness.serve.probe cpu|cuda", file=sys.stderr)
        return 2
    try:
        data = report(argv[0])
    except Exception as exc:  # any failure means the device is not fit; the reason is the output
        print(f"probe failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(data))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
