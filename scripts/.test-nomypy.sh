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

KOPE_TEST_HOME="$(mktemp -d -t kope-test-XXXXXX)"
export KOPE_DATA_DIR="$KOPE_TEST_HOME/data"
unset KOPE_NEO4J_URI KOPE_NEO4J_PASSWORD KOPE_CONFIG
read -r BOLT HTTP < <(python -c 'from kope.db.ports import free_port as f; print(f(), f())')
export KOPE_NEO4J_BOLT_PORT="$BOLT" KOPE_NEO4J_HTTP_PORT="$HTTP"

cleanup() {
    KOPE_NEO4J_URI= kope db stop >/dev/null 2>&1 || true
    rm -rf "$KOPE_TEST_HOME"
}
trap cleanup EXIT

kope db start
export KOPE_NEO4J_URI="bolt://127.0.0.1:$BOLT"
export KOPE_NEO4J_PASSWORD="$(cat "$KOPE_DATA_DIR/neo4j/password")"
export KOPE_REQUIRE_NEO4J=1  # conftest fails the run if no Neo4j test passed
python -m pytest "$@"
