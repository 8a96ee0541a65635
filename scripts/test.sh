#!/usr/bin/env bash
# KOPE's whole test suite, with all set-up: .venv, install, a dedicated Neo4j
# server (temporary data dir, free ports), pytest, and the server stopped again.
# Before any test: ruff (lint and format check) and mypy; a finding fails the run.
# Extra arguments go to pytest, e.g. scripts/test.sh -k config -x
# The fast paths (CONTRIBUTING.md): scripts/test.sh tests/unit (no database tests, seconds) and
# scripts/test.sh -m "not slow" (unit and integration tests, a few minutes).
source "$(dirname "$0")/bootstrap.sh" test

echo "› ruff check, ruff format --check, mypy" >&2
ruff check --quiet .
ruff format --check --quiet .
mypy
# headless Chromium for tests/browser/: quiet when installed; when it cannot be installed it says why
# in one line and those tests fail (they never skip)
"$REPO/scripts/install_browser.sh" || true

KOPE_TEST_HOME="$(mktemp -d -t kope-test-XXXXXX)"
unset KOPE_NEO4J_URI KOPE_NEO4J_PASSWORD KOPE_CONFIG
# One pytest worker per core (pytest-xdist), each with its own Neo4j server: a test empties the graph it
# uses, so two workers never share one. KOPE_TEST_WORKERS=1 runs the suite in this one process.
WORKERS="${KOPE_TEST_WORKERS:-$(nproc)}"
case "$WORKERS" in '' | *[!0-9]* | 0) echo "error: KOPE_TEST_WORKERS must be a positive whole number, got '$WORKERS'" >&2; exit 2 ;; esac

cleanup() {
    for dir in "$KOPE_TEST_HOME"/data*; do
        [ -d "$dir" ] && KOPE_NEO4J_URI= KOPE_DATA_DIR="$dir" kope db stop >/dev/null 2>&1 || true
    done
    rm -rf "$KOPE_TEST_HOME"
}
trap cleanup EXIT

# start_server DATA_DIR: a Neo4j server on two free ports; prints "BOLT_URI HTTP_PORT"
start_server() {
    local bolt http
    read -r bolt http < <(python -c 'from kope.db.ports import free_port as f; print(f(), f())')
    env -u KOPE_NEO4J_URI -u KOPE_NEO4J_PASSWORD KOPE_DATA_DIR="$1" KOPE_NEO4J_BOLT_PORT="$bolt" \
        KOPE_NEO4J_HTTP_PORT="$http" kope db start >&2 || exit 1  # exit: this runs in $(...)
    echo "bolt://127.0.0.1:$bolt $http"
}

# worker 0 (and a run without workers) uses the variables every kope command reads; tests/conftest.py
# points worker K at KOPE_TEST_NEO4J_K ("URI HTTP_PORT DATA_DIR")
export KOPE_DATA_DIR="$KOPE_TEST_HOME/data"
server="$(start_server "$KOPE_DATA_DIR")"
read -r uri http <<< "$server"
export KOPE_NEO4J_URI="$uri" KOPE_NEO4J_HTTP_PORT="$http" KOPE_NEO4J_BOLT_PORT="${uri##*:}"
export KOPE_NEO4J_PASSWORD="$(cat "$KOPE_DATA_DIR/neo4j/password")"
parallel=()
if [ "$WORKERS" -gt 1 ]; then
    for ((k = 1; k < WORKERS; k++)); do
        dir="$KOPE_TEST_HOME/data-$k"
        server="$(start_server "$dir")"
        export "KOPE_TEST_NEO4J_$k=$server $dir"
    done
    parallel=(-n "$WORKERS")
fi
export KOPE_REQUIRE_NEO4J=1  # conftest fails the run if no Neo4j test passed
python -m pytest "${parallel[@]}" "$@"
