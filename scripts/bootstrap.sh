# Sourced by scripts/main.sh and scripts/test.sh: create .venv (once) and install KOPE into it.
# PYTHON selects the interpreter (default python3, must be >= 3.11).
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
PYTHON="${PYTHON:-python3}"
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "KOPE needs Python 3.11+, found " + sys.version.split()[0])'
if [ ! -x .venv/bin/python ]; then
    echo "› creating .venv with $("$PYTHON" --version)" >&2
    "$PYTHON" -m venv .venv
fi
# Reinstall only when the package metadata changed (the first install fetches torch: a few minutes).
stamp=".venv/.kope-installed-$1"
want="$(sha256sum < pyproject.toml | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    # torch (a CUDA build on PyPI) and its libraries take about 6 GB in .venv; without pip's cache
    # the download is not kept twice. Say so up front rather than fail half-way with ENOSPC.
    free_kb="$(df -Pk "$REPO" | awk 'NR==2 {print $4}')"
    if [ ! -f .venv/.kope-installed-main ] && [ ! -f .venv/.kope-installed-test ] && [ "${free_kb:-0}" -lt 8000000 ]; then
        echo "error: installing KOPE needs about 8 GB free on the disk holding $REPO; $((free_kb / 1048576)) GB are free" >&2
        exit 1
    fi
    echo "› installing KOPE and its dependencies into .venv (first time: several minutes, torch is large)" >&2
    .venv/bin/python -m pip install --quiet --no-cache-dir --upgrade pip
    .venv/bin/python -m pip install --quiet --no-cache-dir -e ".[$1]"
    echo "$want" > "$stamp"
fi
export PATH="$REPO/.venv/bin:$PATH"
