#!/usr/bin/env bash
# The harness's GPU checks, for a machine with an NVIDIA GPU (a few minutes):
#   1. refuse to run (exit 2, clear message) when torch sees no GPU;
#   2. the triton and cuda tests (tests/e2e/test_harness_gpu.py) and the trust checks on the GPU
#      (tests/e2e/test_harness_gpu_trust.py: a CPU fallback is caught as device-to-host traffic, the end
#      event waits for every stream, GPU peaks and the physical-limit check, held-out cases on the
#      device), which must pass, not skip;
#   3. a short timing comparison: Triton and CUDA ReLU kernels against torch.relu on the GPU;
#   4. every Triton kernel template's default candidate timed against PyTorch on its operators' first cases
#      (benchmarks/time_triton_templates.py; TRITON_TEMPLATE_ARGS adds options, e.g. --all-values);
#   5. the triton and cuda ReLU evaluated through an evaluation worker on this host (`python -m harness serve
#      --devices auto` on 127.0.0.1, kope's HTTP evaluator): the same statuses and cases as locally, on the GPU.
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

echo "== tests: triton and cuda targets, trust checks on the GPU"
log="$(mktemp -t kope-gpu-check-XXXXXX.log)"
set +e
"$PY" -m pytest -q -p no:cacheprovider -rs tests/e2e/test_harness_gpu.py tests/e2e/test_harness_gpu_trust.py 2>&1 | tee "$log"
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
echo "== roofline: the GPU's measured peaks and each case's fraction of roofline (cuda ReLU)"
"$PY" -m harness eval relu tests/fixtures/cuda/relu.py --target cuda --cases 0-6 --rep-ms 100 --json \
    | "$PY" -c "import json, sys; o = json.load(sys.stdin); [print(c['name'], 'bound_ms', c.get('bound_ms'), 'fraction', c.get('roofline_fraction')) for c in o['cases']]"
echo "== timing: Triton kernel templates (default settings) vs PyTorch, cases 0-2 of each operator"
# shellcheck disable=SC2086  # TRITON_TEMPLATE_ARGS is a list of options
"$PY" benchmarks/time_triton_templates.py ${TRITON_TEMPLATE_ARGS:-}
echo "== through an evaluation worker on this GPU host (kope --evaluator http://127.0.0.1:PORT)"
"$PY" - <<'EOF'
import os, secrets, subprocess, sys, tempfile, time
from pathlib import Path

from harness.suite import find_task
from kope.boundary import eval_options
from kope.config import load_config
from kope.evaluators import make_evaluator

key = secrets.token_urlsafe(24)
tmp = Path(tempfile.mkdtemp(prefix="kope-gpu-worker-"))
port_file = tmp / "port"
env = {**os.environ, "KOPE_WORKER_KEY": key}
worker = subprocess.Popen([sys.executable, "-m", "harness", "serve", "--port", "0", "--devices", "auto",
                           "--cache-dir", str(tmp / "cache"), "--port-file", str(port_file)], env=env)
try:
    deadline = time.monotonic() + 300
    while not port_file.exists():
        if worker.poll() is not None or time.monotonic() > deadline:
            sys.exit("error: the evaluation worker did not start")
        time.sleep(0.2)
    os.environ["KOPE_WORKER_KEY"] = key
    config = load_config()
    remote = make_evaluator(config, f"http://127.0.0.1:{port_file.read_text().strip()}")
    local = make_evaluator(config, "local")
    task = find_task("relu").path
    for target, candidate in (("triton", "tests/fixtures/triton/relu.py"), ("cuda", "tests/fixtures/cuda/relu.py")):
        options = eval_options(target=target)
        there = remote.evaluate(task, Path(candidate).resolve(), options)
        here = local.evaluate(task, Path(candidate).resolve(), options)
        same = (there.status, [c.passed for c in there.cases]) == (here.status, [c.passed for c in here.cases])
        print(f"{target}: worker {there.status.value} {there.cases_passed}/{there.cases_total} on "
              f"{there.hardware.class_} [{there.hardware.id}]; local {here.status.value} "
              f"{here.cases_passed}/{here.cases_total}: {'same' if same else 'DIFFERENT'}")
        if not same:
            sys.exit(f"error: the {target} outcome through the worker differs from the local one")
    remote.close()
finally:
    worker.terminate()
    worker.wait(timeout=60)
EOF
echo "gpu_check: done"
