#!/usr/bin/env bash
# Record the Triton search spaces of the built-in suite on an NVIDIA GPU, for the learning bench on replay
# (issue 34: on the 2-core CPU the spaces are flat, most knobs move a kernel's time by less than 10 %, so operators
# of a template share little that their defaults miss; on a GPU block sizes and warps move it several-fold).
#
#   scripts/gpu_record_spaces.sh OUT_DIR
#
# Within GPU_RECORD_BUDGET_S seconds (default 480), family by family (elementwise, normalization, reduction, matmul;
# convolution has no Triton template), the operators a Triton template computes:
#   pass 1: `kope bench record-space --target triton --cases 0 --budget-ms 100 --max-settings 24 --resume`
#           (the defaults, every single-knob change, a seeded sample; each space's optimum confirmed, --confirm 2);
#   pass 2: the same with `--transfer-from OUT_DIR` (the two fastest settings of the template's other operators).
# Every setting is written to OUT_DIR as it is measured, so a part cut by the budget loses at most the setting in
# flight: run the script again on the same folder (the next device session) and it goes on. Each part prints its
# seconds; a table of the parts ends the output. Then, on any machine:
#   kope bench --suite builtin --target triton --family F --cases 0 --steps 8 --configs active,no-memory \
#       --repeats 20 --evaluator replay:OUT_DIR --workers 1
# Exit 0: every part finished; 3: the budget ran out first (run it again); 2: no GPU or a bad argument.
# PYTHON selects the interpreter (torch with CUDA, triton and KOPE's dependencies: scripts/wheelhouse.sh).
# GPU_RECORD_FAMILIES (space-separated) narrows the families; GPU_RECORD_MAX_SETTINGS sets --max-settings.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
BUDGET_S="${GPU_RECORD_BUDGET_S:-480}"
FAMILIES="${GPU_RECORD_FAMILIES:-elementwise normalization reduction matmul}"
MAX_SETTINGS="${GPU_RECORD_MAX_SETTINGS:-24}"
START=$SECONDS

if [ $# -ne 1 ] || [ -z "$1" ]; then
    echo "error: usage: scripts/gpu_record_spaces.sh OUT_DIR (the folder the spaces are written to and resumed from)" >&2
    exit 2
fi
OUT="$1"
if ! [[ "$BUDGET_S" =~ ^[0-9]+$ ]] || [ "$BUDGET_S" -lt 1 ]; then
    echo "error: GPU_RECORD_BUDGET_S must be a whole number of seconds, at least 1 (got '$BUDGET_S')" >&2
    exit 2
fi
if ! "$PY" -c 'import torch, triton, kope' 2>/dev/null; then
    echo "error: $PY cannot import torch, triton and kope (install KOPE's wheels there: scripts/wheelhouse.sh)" >&2
    exit 2
fi
# a fresh interpreter of its own, as the harness does: nothing here forks from a process that touched CUDA
if [ "${GPU_RECORD_ALLOW_INTERPRET:-0}" != 1 ] \
    && ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
    echo "error: no NVIDIA GPU visible to torch (torch.cuda.is_available() is False); recording Triton spaces needs one" >&2
    exit 2
fi
mkdir -p "$OUT" || { echo "error: cannot create $OUT" >&2; exit 2; }

ROWS=()
CUT=0
part() {  # part NAME ARGS...: one record-space run under what is left of the budget
    local name="$1"
    shift
    local left=$((BUDGET_S - (SECONDS - START)))
    if [ "$left" -le 5 ]; then
        ROWS+=("$(printf '%-26s %-8s %6s' "$name" "not run" -)")
        CUT=1
        return
    fi
    echo "== $name (at most ${left} s)"
    local t0=$SECONDS
    # SIGINT first: record-space keeps every setting measured so far and says how to resume
    timeout --signal=INT --kill-after=20 "$left" "$PY" -m kope bench record-space --suite builtin --target triton \
        --cases 0 --budget-ms 100 --max-settings "$MAX_SETTINGS" --out "$OUT" --resume "$@"
    local status=$?
    local verdict=done
    if [ "$status" -eq 124 ] || [ "$status" -eq 130 ] || [ "$status" -eq 137 ]; then
        verdict=cut
        CUT=1
    elif [ "$status" -ne 0 ]; then
        verdict="exit_$status"
        CUT=1
    fi
    ROWS+=("$(printf '%-26s %-8s %6s' "$name" "$verdict" $((SECONDS - t0)))")
}

for family in $FAMILIES; do
    part "$family" --family "$family"
done
for family in $FAMILIES; do
    part "$family (transfer)" --family "$family" --transfer-from "$OUT"
done

echo
printf '%-26s %-8s %6s\n' part result seconds
printf '%s\n' "${ROWS[@]}"
echo "spaces in $OUT: $(find "$OUT" -name '*.space.json' | wc -l) files; $((SECONDS - START)) s of ${BUDGET_S} s"
if [ "$CUT" -ne 0 ]; then
    echo "note: not finished within the budget: run scripts/gpu_record_spaces.sh $OUT again to go on"
    exit 3
fi
exit 0
