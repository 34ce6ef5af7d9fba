#!/usr/bin/env bash
# Install labkit with its test extras into .venv (created if missing) and run the whole test suite.
# Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if [ -n "${LABKIT_TORCH_SPEC:-}" ]; then
  .venv/bin/python -m pip install -q "$LABKIT_TORCH_SPEC"
fi
.venv/bin/python -m pip install -q -e '.[test,lab,browser]'
# Test files run in parallel (pytest-xdist, one file per worker at a time, so a file's fixtures —
# the browser test's JupyterLab and Chromium — are set up once): one worker per CPU plus one, at most 4.
# The extra worker fills the time the others wait (kernels starting, the browser, rank timeouts): on
# 2 cores the suite took 249 s with 3 workers against 284-317 s with 2 (2026-11-23, 857 tests).
# LABKIT_TEST_WORKERS=0 runs everything in this process.
cpus=$(nproc 2>/dev/null || echo 2)
workers=${LABKIT_TEST_WORKERS:-$(( cpus + 1 < 4 ? cpus + 1 : 4 ))}
if [ "$workers" -gt 0 ]; then
  .venv/bin/python -m pytest -q -n "$workers" --dist loadfile "$@"
else
  .venv/bin/python -m pytest -q "$@"
fi
