#!/usr/bin/env bash
# The harness's one GPU check, for a machine with an NVIDIA GPU; finishes within GPU_CHECK_BUDGET_S (480 s).
#   0. refuse to run (exit 2, clear message) when torch sees no GPU;
#   1. the GPU worker model without the device (tests/unit/test_gpu_worker_model.py, test_device_traffic.py,
#      tests/integration/test_gpu_fork_hazard.py,
#      tests/e2e/test_harness_gpu_workers.py: the zygote never touched CUDA, GPU sandbox profile, sticky errors);
#   2. the triton and cuda targets and the trust checks on the GPU (tests/e2e/test_harness_gpu.py,
#      test_harness_gpu_trust.py), which must pass, not skip;
#   3. the triton and cuda ReLU against torch.relu: per-case times, speedup, roofline fraction, GPU clocks;
#   4. every Triton kernel template's default candidate on each of its operators (benchmarks/time_triton_templates.py,
#      case 0; TRITON_TEMPLATE_ARGS adds options, e.g. --all-values, when time allows);
#   5. a KernelBench-style level-2 task (gemm_bias_relu, fused) on the triton target through `kope eval`;
#   6. the triton and cuda ReLU through an evaluation worker on this host (`python -m harness serve --devices auto`
#      on 127.0.0.1, kope's HTTP evaluator): the same statuses and cases as locally.
#   7. with time to spare, every knob value of every Triton template (optional: a timeout does not fail the check).
# A table of the steps (status, seconds, the key numbers) ends the output. Exit 0 only when every step passed.
# Usage: scripts/gpu_check.sh   (PYTHON selects the interpreter; it needs torch with CUDA, triton, pytest)
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
BUDGET_S="${GPU_CHECK_BUDGET_S:-480}"
START=$SECONDS
WORK="$(mktemp -d -t kope-gpu-check-XXXXXX)"
export PY WORK
ROWS=()
FAILED=0

if ! "$PY" -c 'import torch, triton, pytest' 2>/dev/null; then
    echo "error: $PY cannot import torch, triton and pytest (set PYTHON to the interpreter of KOPE's environment)" >&2
    exit 2
fi
# in a fresh interpreter of its own, like the harness does it: this shell's later steps fork nothing from it
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "error: no NVIDIA GPU visible to torch (torch.cuda.is_available() is False); the GPU checks cannot run here" >&2
    exit 2
fi
"$PY" -c 'import torch, triton; p = torch.cuda.get_device_properties(0); print(f"GPU: {p.name}, sm_{p.major}{p.minor}, {p.multi_processor_count} SMs, {p.total_memory >> 30} GiB; torch {torch.__version__} (CUDA {torch.version.cuda}), triton {triton.__version__}")'
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv 2>/dev/null || true

# step NAME CAP_S COMMAND...: run COMMAND under what is left of the budget (at most CAP_S), log it, add a row.
# The step's note is the last line of its log that starts with "note:". OPTIONAL=1: a timeout or skip of this
# step (run only with time to spare) does not fail the check.
step() {
    local name="$1" cap="$2"
    shift 2
    local optional="${OPTIONAL:-0}"
    local left=$((BUDGET_S - (SECONDS - START)))
    local log="$WORK/$name.log"
    if [ "$left" -le 5 ]; then
        ROWS+=("$(printf '%-22s %-8s %6s  %s' "$name" skipped - "no time left of ${BUDGET_S} s")")
        [ "$optional" = 1 ] || FAILED=1
        return
    fi
    local limit=$((cap < left ? cap : left))
    echo "== $name (at most ${limit} s)"
    local t0=$SECONDS
    timeout --kill-after=10 "$limit" bash -c '"$@"' _ "$@" 2>&1 | tee "$log"  # shell functions: exported below
    local status=${PIPESTATUS[0]}
    local verdict=ok
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
        verdict=timeout
    elif [ "$status" -ne 0 ]; then
        verdict="exit_$status"
    elif grep -qiE "[0-9]+ skipped" "$log"; then  # a skipped GPU test is a check that did not happen
        verdict=skipped
    fi
    if [ "$verdict" != ok ] && ! { [ "$optional" = 1 ] && [ "$verdict" = timeout ]; }; then
        FAILED=1
    fi
    local note
    note="$(grep '^note:' "$log" | tail -1 | cut -c7-)"
    ROWS+=("$(printf '%-22s %-8s %6s  %s' "$name" "$verdict" $((SECONDS - t0)) "$note")")
}

relu() {  # relu TARGET: per-case times, speedup and roofline fraction of the fixture's ReLU
    "$PY" -m harness eval relu "tests/fixtures/$1/relu.py" --target "$1" --cases 0-6 --rep-ms 50 --json \
        >"$WORK/relu_$1.json"
    local status=$?
    "$PY" - "$WORK/relu_$1.json" "$1" <<'EOF'
import json, sys
o = json.load(open(sys.argv[1]))
for c in o["cases"]:
    cand, ref = c.get("cand_ms") or {}, c.get("ref_ms") or {}
    print(f"{c['name']:>16}  cand {cand.get('median', 0):.4f} ms [{cand.get('ci_low')}, {cand.get('ci_high')}]  "
          f"torch {ref.get('median', 0):.4f} ms  speedup {c.get('speedup') or 0:.2f}x  roofline {c.get('roofline_fraction')}")
gpu = (o.get("hardware") or {}).get("gpu") or {}
fractions = [c["roofline_fraction"] for c in o["cases"] if c.get("roofline_fraction")]
print(f"note: {sys.argv[2]} relu {o['status']} {o.get('cases_passed')}/{o.get('cases_total')}, speedup {o.get('speedup') or 0:.2f}x, "
      f"roofline max {max(fractions) if fractions else 'n/a'}, SM {gpu.get('sm_clock_mhz')} MHz mem {gpu.get('mem_clock_mhz')} MHz")
sys.exit(0 if o["status"] == "correct" else 1)
EOF
    local parsed=$?
    [ "$status" -eq 0 ] && [ "$parsed" -eq 0 ]
}

templates() {
    # shellcheck disable=SC2086  # TRITON_TEMPLATE_ARGS is a list of options
    "$PY" benchmarks/time_triton_templates.py --cases 0 --rep-ms 50 ${TRITON_TEMPLATE_ARGS:-} | tee "$WORK/templates.out"
    local status=${PIPESTATUS[0]}
    echo "note: $(grep 'geomean' "$WORK/templates.out" | tail -1)"
    return "$status"
}

level2() {  # the gemm_epilogue template's default candidate for gemm_bias_relu, through `kope eval`
    "$PY" - "$WORK/gemm_bias_relu.py" <<'EOF' || return 1
import sys
from harness.suite.kernel_templates import list_templates
template = next(t for t in list_templates("triton") if "gemm_bias_relu" in t.operators)
open(sys.argv[1], "w").write(template.render("gemm_bias_relu", template.check_settings({})))
EOF
    "$PY" -m kope eval gemm_bias_relu "$WORK/gemm_bias_relu.py" --target triton --cases 0-1 --rep-ms 50 --json \
        >"$WORK/level2.json"
    local status=$?
    "$PY" -c "import json, sys; o = json.load(open(sys.argv[1])); print(f\"note: gemm_bias_relu (level 2) {o['status']} {o.get('cases_passed')}/{o.get('cases_total')}, speedup {o.get('speedup') or 0:.2f}x\")" "$WORK/level2.json"
    return "$status"
}

worker_round_trip() {
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
notes = []
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
        notes.append(f"{target} {there.status.value} {'same' if same else 'DIFFERENT'}")
        if not same or there.status.value != "correct":
            print("note: " + "; ".join(notes))
            sys.exit(f"error: the {target} outcome through the worker differs from the local one or is not correct")
    remote.close()
    print("note: " + "; ".join(notes))
finally:
    worker.terminate()
    worker.wait(timeout=60)
EOF
}

export -f relu templates level2 worker_round_trip

step worker-model 120 "$PY" -m pytest -q -p no:cacheprovider -rs -n 4 tests/unit/test_gpu_worker_model.py \
    tests/integration/test_gpu_fork_hazard.py tests/unit/test_device_traffic.py tests/e2e/test_harness_gpu_workers.py
step gpu-tests 150 "$PY" -m pytest -q -p no:cacheprovider -rs -n 2 tests/e2e/test_harness_gpu.py \
    tests/e2e/test_harness_gpu_trust.py
step relu-triton 60 relu triton
step relu-cuda 90 relu cuda
step triton-templates 150 templates
step level2-triton 60 level2
step http-worker 90 worker_round_trip
# with time to spare: every knob value of every Triton template (others at their defaults), until the budget ends
OPTIONAL=1 TRITON_TEMPLATE_ARGS="--all-values" step triton-knobs 600 templates

echo
echo "== gpu_check: $((SECONDS - START)) s of ${BUDGET_S} s (logs in $WORK)"
printf '%-22s %-8s %6s  %s\n' step status seconds note
for row in "${ROWS[@]}"; do
    echo "$row"
done
exit "$FAILED"
