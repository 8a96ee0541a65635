"""The GPU worker model in real sandboxed workers, for the parts that need no device (issue 32).

The zygote never touches CUDA (asked in the zygote process itself), a zygote that did refuses to fork
and its workers boot fresh, a worker under the GPU sandbox profile has no address-space limit and may
open the profile's device nodes for writing (Landlock) while seccomp keeps trapping, and a sticky CUDA
error retires the worker that met it. The GPU run of the same model is scripts/gpu_check.sh.
"""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path

import pytest

from harness.commands import cache_root
from harness.ipc import decode_request, encode
from harness.sandbox import CPU_PROFILE, GPU_PROFILE, landlock_abi, sandbox_status
from harness.targets.cuda import CudaTarget
from harness.worker_pool import Limits, ReferencePool, WorkerSpec
from harness.worker_process import worker_env
from harness.zygote_client import Zygote, zygote_refusal

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "fixtures" / "tasks" / "tiny_relu.py"

pytestmark = pytest.mark.skipif(not sandbox_status().available, reason="no OS sandbox on this machine")


def _spec(env: dict[str, str], profile=CPU_PROFILE) -> WorkerSpec:
    return WorkerSpec(
        env=tuple(sorted(env.items())),
        limits=Limits(),
        uses_rlimit_as=True,
        sandboxed=True,
        hidden=(),
        cache_root=str(cache_root()),
        profile=profile,
    )


def _compile(request: dict) -> dict:
    from harness.compile_service import serve_compile

    return serve_compile({**request, "timeout": 300.0})


def _load(worker, candidate: Path) -> dict:
    worker.compile_service = _compile  # the SIGSYS reporter is compiled by the parent, as in an evaluation
    header = {
        "op": "load",
        "role": "candidate",
        "task": str(TASK),
        "candidate": str(candidate),
        "target": "cpu",
        "target_options": {},
        "threads": 1,
        "case": 0,
        "init_seed": 1,
    }
    reply, _ = worker.request(decode_request(header), 120, "loading the candidate")
    return encode(reply)


REPORT = """
import json, os, resource, socket
info = {"rlimit_as_unlimited": resource.getrlimit(resource.RLIMIT_AS)[0] == resource.RLIM_INFINITY}
try:
    with open("/dev/zero", "wb") as f:
        f.write(b"0")
    info["device_write"] = True
except OSError as exc:
    info["device_write"] = False
try:
    socket.socket()
    info["socket"] = True
except OSError:
    info["socket"] = False
raise RuntimeError("REPORT" + json.dumps(info) + "END")
"""


def _report(tmp_path: Path, profile) -> dict:
    candidate = tmp_path / "report.py"
    candidate.write_text(REPORT)
    worker = _spec(worker_env({"OMP_NUM_THREADS": "1"}, True), profile).start(zygote=False)
    try:
        reply = _load(worker, candidate)
    finally:
        worker.close()
    message = reply.get("message", "")
    assert "REPORT" in message, reply
    return json.loads(message.split("REPORT", 1)[1].split("END", 1)[0])


def test_the_zygote_of_a_gpu_target_has_never_touched_cuda():
    env = worker_env(CudaTarget().worker_env(1), True)
    zygote = Zygote(env, ())
    try:
        state = zygote.state()  # read in the zygote process itself
    finally:
        zygote.close()
    assert state["touched"] is None, state
    assert not state["initialized"] and not state["calls"] and not state["libcuda"] and not state["bad_fork"]


def test_a_zygote_that_touched_cuda_refuses_to_fork_and_its_workers_boot_fresh(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    # runs at interpreter start, before the zygote's tripwire: only the probe fork can see it
    (site / "sitecustomize.py").write_text("import torch\ntorch.cuda.is_available()\n")
    env = worker_env({"OMP_NUM_THREADS": "1"}, True)
    env["PYTHONPATH"] = f"{site}:{env['PYTHONPATH']}"
    zygote = Zygote(env, ())
    try:
        state = zygote.state()
    finally:
        zygote.close()
    if torch_without_cuda():
        pytest.skip("torch without CUDA: is_available() touches nothing")
    assert state["bad_fork"] and "bad fork" in (state["touched"] or ""), state
    worker = _spec(env).start()
    try:
        worker.wait_ready(120)
        assert not worker.forked
        assert "bad fork" in (zygote_refusal(env) or "")
    finally:
        worker.close()


def torch_without_cuda() -> bool:
    import torch

    return torch.version.cuda is None


def test_a_gpu_profile_worker_has_no_address_space_limit_opens_its_device_nodes_and_seccomp_still_traps(tmp_path):
    # No NVIDIA device here: /dev/zero stands in for the driver's nodes to show the Landlock rule for them.
    profile = dataclasses.replace(GPU_PROFILE, devices=(*GPU_PROFILE.devices, "/dev/zero"))
    gpu = _report(tmp_path, profile)
    assert gpu["rlimit_as_unlimited"] and not gpu["socket"]
    cpu = _report(tmp_path, CPU_PROFILE)
    assert not cpu["rlimit_as_unlimited"] and not cpu["socket"]
    if landlock_abi() > 0:
        assert gpu["device_write"] and not cpu["device_write"]


STICKY = """
import torch
class ModelNew(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
"""


def test_a_sticky_cuda_error_retires_the_worker_and_it_is_never_reused(tmp_path):
    candidate = tmp_path / "sticky.py"
    candidate.write_text(textwrap.dedent(STICKY))
    worker = _spec(worker_env({"OMP_NUM_THREADS": "1"}, True)).start()
    try:
        assert _load(worker, candidate)["ok"]
        run = {"op": "run", "case": 0, "init_seed": 1, "seeds": [1, 2], "lazy_check": False}
        first = encode(worker.request(decode_request(run), 120, "a trial")[0])
        assert not first["ok"] and first["retire"] and first["sticky"] == "cuda:illegal_address"
        assert worker.retired
        again = encode(worker.request(decode_request(run), 120, "a trial after the sticky error")[0])  # no device use
        assert again["retire"] and again["error_kind"] == first["error_kind"]
        pool = ReferencePool()
        pool.give(("task",), worker, {})
        assert pool.take(("task",)) is None and not worker.alive()
    finally:
        worker.close()
