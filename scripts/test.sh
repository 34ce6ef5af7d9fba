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
.venv/bin/python -m pytest -q "$@"
