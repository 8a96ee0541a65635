#!/usr/bin/env bash
# The harness's GPU checks, for a machine with an NVIDIA GPU (a few minutes):
#   1. refuse to run (exit 2, clear message) when torch sees no GPU;
#   2. the triton and cuda tests (tests/e2e/test_harness_gpu.py), which must pass, not skip;
#   3. a short timing comparison: Triton and CUDA ReLU kernels against torch.relu on the GPU;
#   4. every Triton kernel template's default candidate timed against PyTorch on its operators' first cases
#      (benchmarks/time_triton_templates.py; TRITON_TEMPLATE_ARGS adds options, e.g. --all-values).
# Usage: scripts/gpu_check.sh   (PYTHON selects the interpreter; it needs torch with CUDA, triton, pytest)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

if ! "$PY" -c 'import torch, triton, pytest' 2>/dev/null; then
    echo "error: $PY cannot import torch, triton and pytest (set PYTHON to the interpreter of KOPE's environment)" >&2
    exit 2
fi
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "error: no NVIDIA GPU visible to torch (torch.cuda.is_available() is False); the GPU checks cannot run here" >&2
    exit 2
fi
"$PY" -c 'import torch, triton; p = torch.cuda.get_device_properties(0); print(f"GPU: {p.name}, sm_{p.major}{p.minor}, {p.multi_processor_count} SMs, {p.total_memory >> 30} GiB; torch {torch.__version__} (CUDA {torch.version.cuda}), triton {triton.__version__}")'

echo "== tests: triton and cuda targets"
log="$(mktemp -t kope-gpu-check-XXXXXX.log)"
set +e
"$PY" -m pytest -q -p no:cacheprovider -rs tests/e2e/test_harness_gpu.py 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
    echo "error: GPU tests failed (exit $status)" >&2
    exit "$status"
fi
if grep -qi "skipped" "$log"; then  # a skip means the check did not happen
    echo "error: GPU tests were skipped" >&2
    exit 1
fi

echo "== timing: ReLU kernels vs torch.relu on the GPU (task relu, float32 and float64 cases)"
"$PY" -m harness eval relu tests/fixtures/triton/relu.py --target triton --cases 0-6 --rep-ms 100
"$PY" -m harness eval relu tests/fixtures/cuda/relu.py --target cuda --cases 0-6 --rep-ms 100
echo "== timing: Triton kernel templates (default settings) vs PyTorch, cases 0-2 of each operator"
# shellcheck disable=SC2086  # TRITON_TEMPLATE_ARGS is a list of options
"$PY" benchmarks/time_triton_templates.py ${TRITON_TEMPLATE_ARGS:-}
echo "gpu_check: done"
