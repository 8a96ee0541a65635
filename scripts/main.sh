#!/usr/bin/env bash
# KOPE's main job on the embedded default: a local Neo4j started for you, the
# CPU target, the offline proposer (no API key). It optimizes a few built-in
# operators of one family in sequence, so the later ones start from what the
# earlier ones taught the memory, and ends with the speedups found, the memory
# before and after, and how to inspect the lineages in Neo4j Browser.
# Neo4j keeps running afterwards; `.venv/bin/kope db stop` stops it.
# Override the selection with KOPE_MAIN_FAMILY / KOPE_MAIN_TASKS / KOPE_MAIN_STEPS.
source "$(dirname "$0")/bootstrap.sh" test
started=$(date +%s)  # after installation: the job itself
kope db start
kope doctor
family="${KOPE_MAIN_FAMILY:-elementwise}"
echo
echo "KOPE main job: ${KOPE_MAIN_TASKS:-3} built-in ${family} operators, offline proposer, cpu target"
kope optimize --suite builtin --family "$family" --limit "${KOPE_MAIN_TASKS:-3}" \
    --steps "${KOPE_MAIN_STEPS:-6}" --proposer offline --target cpu --out kope-out
echo "main job: $(( $(date +%s) - started )) s (after installation)"
