#!/usr/bin/env bash
# KOPE's whole test suite, with all set-up: .venv, install, a dedicated Neo4j
# server (temporary data dir, free ports), pytest, and the server stopped again.
# Before any test: ruff (lint and format check) and mypy; a finding fails the run.
# Extra arguments go to pytest, e.g. scripts/test.sh -k config -x
# The fast paths (CONTRIBUTING.md): scripts/test.sh tests/unit (no database tests, seconds) and
# scripts/test.sh -m "not slow" (unit and integration tests, a few minutes).
source "$(dirname "$0")/bootstrap.sh" test

KOPE_TEST_HOME="$(mktemp -d -t kope-test-XXXXXX)"
unset KOPE_NEO4J_URI KOPE_NEO4J_PASSWORD KOPE_CONFIG
# One pytest worker per core (pytest-xdist), each with its own Neo4j server: a test empties the graph it
# uses, so two workers never share one. KOPE_TEST_WORKERS=1 runs the suite in this one process.
WORKERS="${KOPE_TEST_WORKERS:-$(nproc)}"
case "$WORKERS" in '' | *[!0-9]* | 0) echo "error: KOPE_TEST_WORKERS must be a positive whole number, got '$WORKERS'" >&2; exit 2 ;; esac

server_pids=()
cleanup() {
    for pid in "${server_pids[@]}"; do wait "$pid" 2>/dev/null || true; done  # a start still running
    for dir in "$KOPE_TEST_HOME"/data*; do
        [ -d "$dir" ] && KOPE_NEO4J_URI= KOPE_DATA_DIR="$dir" kope db stop >/dev/null 2>&1 || true
    done
    rm -rf "$KOPE_TEST_HOME"
}
trap cleanup EXIT

# The servers start in the background while ruff, mypy and the browser check run (a Neo4j start takes
# tens of seconds, mostly the JVM). Ports: two per server, all picked by one process that holds every
# socket until it has printed them, so no two servers are given the same port.
data_dir() { if [ "$1" -eq 0 ]; then echo "$KOPE_TEST_HOME/data"; else echo "$KOPE_TEST_HOME/data-$1"; fi; }
read -r -a ports < <(python -c '
import socket, sys
socks = [socket.socket() for _ in range(2 * int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
' "$WORKERS")
for ((k = 0; k < WORKERS; k++)); do
    dir="$(data_dir "$k")"
    env -u KOPE_NEO4J_URI -u KOPE_NEO4J_PASSWORD KOPE_DATA_DIR="$dir" KOPE_NEO4J_BOLT_PORT="${ports[2 * k]}" \
        KOPE_NEO4J_HTTP_PORT="${ports[2 * k + 1]}" kope db start > "$KOPE_TEST_HOME/start-$k.log" 2>&1 &
    server_pids+=($!)
done

echo "› ruff check, ruff format --check, mypy" >&2
ruff check --quiet .
ruff format --check --quiet .
mypy
# headless Chromium for tests/browser/: quiet when installed; when it cannot be installed it says why
# in one line and those tests fail (they never skip)
"$REPO/scripts/install_browser.sh" || true

for ((k = 0; k < WORKERS; k++)); do
    if ! wait "${server_pids[k]}"; then
        cat "$KOPE_TEST_HOME/start-$k.log" >&2
        echo "error: the Neo4j server for pytest worker $k did not start (its output is above)" >&2
        exit 1
    fi
    cat "$KOPE_TEST_HOME/start-$k.log" >&2
done
server_pids=()

# worker 0 (and a run without workers) uses the variables every kope command reads; tests/conftest.py
# points worker K at KOPE_TEST_NEO4J_K ("URI HTTP_PORT DATA_DIR")
export KOPE_DATA_DIR="$KOPE_TEST_HOME/data"
export KOPE_NEO4J_URI="bolt://127.0.0.1:${ports[0]}" KOPE_NEO4J_HTTP_PORT="${ports[1]}" KOPE_NEO4J_BOLT_PORT="${ports[0]}"
export KOPE_NEO4J_PASSWORD="$(cat "$KOPE_DATA_DIR/neo4j/password")"
parallel=()
if [ "$WORKERS" -gt 1 ]; then
    for ((k = 1; k < WORKERS; k++)); do
        export "KOPE_TEST_NEO4J_$k=bolt://127.0.0.1:${ports[2 * k]} ${ports[2 * k + 1]} $(data_dir "$k")"
    done
    parallel=(-n "$WORKERS" --dist worksteal)
fi
export KOPE_REQUIRE_NEO4J=1  # conftest fails the run if no Neo4j test passed
python -m pytest "${parallel[@]}" "$@"
