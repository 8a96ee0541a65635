#!/usr/bin/env bash
# KOPE's main job on the embedded default: a local Neo4j started for you,
# the CPU target, no API key. Leaves Neo4j running so you can open Browser;
# `.venv/bin/kope db stop` stops it.
source "$(dirname "$0")/bootstrap.sh" test
kope db start
kope doctor
kope db status
