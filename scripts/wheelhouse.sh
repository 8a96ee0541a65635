#!/usr/bin/env bash
# A folder of wheels for installing KOPE on a host without network access (an air-gapped GPU cluster).
#
#   scripts/wheelhouse.sh [--python-version 3.12] [--platform manylinux_2_28_x86_64] [--dest wheels] [--no-test]
#                         [--check PYTHON]
#
# Downloads, on a machine with network access, binary wheels (--only-binary=:all:) of every dependency of KOPE
# except torch and triton (the GPU host has its own CUDA build of those; they are large and tied to its driver),
# with their dependencies, for the given Python version and platform, plus the `test` extra (pytest and
# pytest-xdist: scripts/gpu_check.sh needs them; --no-test leaves it out) and KOPE's own wheel. Copy the folder
# to the host, then, with torch and triton already installed there:
#
#   pip install --no-index --find-links wheels/ kope            # or 'kope[test]' for scripts/gpu_check.sh
#
# --check PYTHON: afterwards install everything from the folder alone (--no-index) into a fresh virtual
# environment of PYTHON (which must be the --python-version), torch and triton aside, and import kope's
# configuration from it: the proof that the folder is complete. Nothing is committed: wheels/ is ignored.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
PYVER=3.12
DEST=wheels
TEST=1
CHECK=""
ARCH="$(uname -m)"
PLATFORMS=()
while [ $# -gt 0 ]; do
    case "$1" in
        --python-version) PYVER="$2"; shift 2 ;;
        --platform) PLATFORMS+=("$2"); shift 2 ;;
        --dest) DEST="$2"; shift 2 ;;
        --no-test) TEST=0; shift ;;
        --check) CHECK="$2"; shift 2 ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) echo "error: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
if ! [[ "$PYVER" =~ ^3\.[0-9]+$ ]]; then
    echo "error: --python-version must look like 3.12, got '$PYVER'" >&2
    exit 2
fi
if [ ${#PLATFORMS[@]} -eq 0 ]; then  # glibc-based Linux, newest tag first (pip takes any of them)
    PLATFORMS=("manylinux_2_28_$ARCH" "manylinux_2_17_$ARCH" "manylinux2014_$ARCH")
fi
mkdir -p "$DEST"
REQS="$(mktemp -t kope-wheelhouse-XXXXXX.txt)"
trap 'rm -f "$REQS"' EXIT

# KOPE's requirements from pyproject.toml, torch and triton left out
"$PY" - "$TEST" >"$REQS" <<'EOF'
import re, sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
reqs = list(project["dependencies"])
if sys.argv[1] == "1":
    reqs += project.get("optional-dependencies", {}).get("test", [])
for req in reqs:
    name = re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0].lower()
    if name not in ("torch", "triton"):
        print(req)
EOF
echo "== $(wc -l <"$REQS") requirements (torch and triton left out) for Python $PYVER on ${PLATFORMS[*]}"
platform_args=()
for p in "${PLATFORMS[@]}"; do platform_args+=(--platform "$p"); done
"$PY" -m pip download --only-binary=:all: --python-version "$PYVER" --implementation cp \
    "${platform_args[@]}" --dest "$DEST" -r "$REQS"
echo "== KOPE's own wheel"
"$PY" -m pip wheel --no-deps --wheel-dir "$DEST" .
echo "== $(find "$DEST" -name '*.whl' | wc -l) wheels in $DEST ($(du -sh "$DEST" | cut -f1))"

if [ -n "$CHECK" ]; then
    have="$("$CHECK" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
    if [ "$have" != "$PYVER" ]; then
        echo "error: --check $CHECK is Python $have, the wheels are for $PYVER" >&2
        exit 2
    fi
    venv="$(mktemp -d -t kope-wheelhouse-check-XXXXXX)"
    "$CHECK" -m venv "$venv"
    # offline: the folder alone; torch and triton are the host's own, so kope itself goes in without dependencies
    "$venv/bin/pip" install --quiet --no-index --find-links "$DEST" -r "$REQS"
    "$venv/bin/pip" install --quiet --no-index --find-links "$DEST" --no-deps kope
    "$venv/bin/pip" check 2>&1 | grep -viE '^kope [0-9.]+ requires (torch|triton)' || true
    "$venv/bin/python" -c 'import kope.config, kope.db.client, kope.server, neo4j, fastapi, pyseccomp, sklearn; print("offline install ok: kope", __import__("importlib.metadata").metadata.version("kope"))'
    rm -rf "$venv"
fi
