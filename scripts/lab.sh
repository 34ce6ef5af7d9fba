#!/usr/bin/env bash
# Install labkit into .venv (created if missing) and open the workbook in JupyterLab.
# JupyterLab listens on 127.0.0.1 only and requires its token (printed below) by default.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
if [ -n "${LABKIT_TORCH_SPEC:-}" ]; then
  .venv/bin/python -m pip install -q "$LABKIT_TORCH_SPEC"
fi
.venv/bin/python -m pip install -q -e '.[lab,run]'
exec .venv/bin/jupyter lab --ServerApp.ip=127.0.0.1 --notebook-dir=notebooks "$@"
