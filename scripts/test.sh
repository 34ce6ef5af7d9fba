#!/usr/bin/env bash
# Install labkit with its test extras into .venv when needed, and run the whole test suite.
#
#   bash scripts/test.sh [--reinstall] [pytest arguments...]
#
# The first run creates .venv and installs (network needed; CI always runs on a fresh clone); later runs
# install nothing and work offline, until pyproject.toml changes or you ask (--reinstall or
# LABKIT_REINSTALL=1). The torch build: LABKIT_TORCH_INDEX / LABKIT_TORCH_SPEC, see scripts/venv.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh

labkit_args "$@"
labkit_venv test,lab,browser "$reinstall" pytest

# Test files run in parallel (pytest-xdist, one file per worker at a time, so a file's fixtures —
# the browser test's JupyterLab and Chromium — are set up once): one worker per CPU plus one, at most 4.
# The extra worker fills the time the others wait (kernels starting, the browser, rank timeouts): on
# 2 cores the suite took 249 s with 3 workers against 284-317 s with 2 (2026-11-23, 857 tests).
# The files of browser, notebook and other slow tests start first (tests/conftest.py sets the order).
# LABKIT_TEST_WORKERS=0 runs everything in this process.
cpus=$(nproc 2>/dev/null || echo 2)
workers=${LABKIT_TEST_WORKERS:-$(( cpus + 1 < 4 ? cpus + 1 : 4 ))}
if [ "$workers" -gt 0 ]; then
  .venv/bin/python -m pytest -q -n "$workers" --dist loadfile ${args[@]+"${args[@]}"}
else
  .venv/bin/python -m pytest -q ${args[@]+"${args[@]}"}
fi
