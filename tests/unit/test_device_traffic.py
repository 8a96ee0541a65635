"""Device-to-host traffic during forward (a CPU fallback on a GPU target), tested here without a GPU.

The GPU run is scripts/gpu_check.sh (tests/e2e/test_harness_gpu_trust.py)."""

import torch

from harness.device_traffic import LIMIT_FLOOR_BYTES, HostTraffic, event_bytes, trace_dtoh_bytes, verdict
from harness.guards import AuditGuard


def test_a_few_scalars_read_back_are_allowed():
    assert verdict(8, 64 << 20) is None
    assert verdict(LIMIT_FLOOR_BYTES, 0) is None


def test_copying_the_inputs_to_the_host_is_a_cpu_fallback():
    message = verdict(64 << 20, 64 << 20)
    assert message and "computing on the CPU is not a GPU kernel" in message


def test_the_dispatcher_layer_counts_copies_from_the_watched_device_to_the_host():
    # On a CPU-only machine the "device" watched is the CPU itself: the same code path as cuda -> cpu.
    x = torch.randn(256, 256)
    with HostTraffic(source="cpu", profile=False) as traffic:
        y = x.to("cpu", copy=True)
        z = torch.empty(256, 256)
        z.copy_(x)
        torch.empty_like(x)  # an allocation is no traffic
    assert traffic.bytes == 2 * x.numel() * 4 and y is not x
    assert traffic.problem([x]) is not None


def test_the_profiler_layer_reads_memcpy_bytes_from_the_trace():
    trace = {
        "traceEvents": [
            {"name": "Memcpy DtoH (Device -> Pageable)", "cat": "gpu_memcpy", "args": {"bytes": 4096}},
            {"name": "Memcpy HtoD (Pageable -> Device)", "cat": "gpu_memcpy", "args": {"bytes": 999}},
            {"name": "Memcpy DtoH (Device -> Pinned)", "cat": "gpu_memcpy", "args": {"bytes": 100}},
            {"name": "void relu_kernel<float>(...)", "cat": "kernel", "args": {}},
        ]
    }
    assert trace_dtoh_bytes(trace) == 4196


def test_a_cpu_target_gets_no_monitor():
    class Cpu:
        device = "cpu"

    class Cuda:
        device = "cuda"

    assert HostTraffic.for_target(Cpu()) is None and isinstance(HostTraffic.for_target(Cuda()), HostTraffic)


def test_the_profiler_layer_reads_bytes_from_in_memory_event_metadata():
    assert event_bytes(0, '"device": 0, "stream": 7, "bytes": 4096, "memory bandwidth (GB/s)": 1.5') == 4096
    assert event_bytes(512, '"bytes": 4096') == 512  # kineto's own count first
    assert event_bytes(0, "") == 0 and event_bytes(0, "not json") == 0


def test_the_device_traffic_check_inside_the_guarded_window_opens_no_file():
    # The worst case: the whole check, profiler included, inside the armed window (the worker starts and stops
    # the profiler outside it). Until issue 32 the trace went through a temporary file: file_access on the GPU.
    guard = AuditGuard()
    x = torch.randn(512, 512)
    traffic = HostTraffic(source="cpu", activities=("CPU",))
    guard.arm()
    try:
        with traffic:
            (x * 2).relu().sum()
    finally:
        events = guard.disarm()
    assert events == [], events
    assert traffic.profiler_error is None and traffic.profiler_events > 0  # the profiler did record the forward
