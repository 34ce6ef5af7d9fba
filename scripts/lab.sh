#!/usr/bin/env bash
# Open the workbook in JupyterLab, installing labkit into .venv first when needed.
#
#   bash scripts/lab.sh [--reinstall] [JupyterLab arguments...]
#
# The first start creates .venv and installs labkit with JupyterLab (network needed); later starts install
# nothing and work offline, until pyproject.toml changes or you ask (--reinstall or LABKIT_REINSTALL=1).
# The torch build: LABKIT_TORCH_INDEX / LABKIT_TORCH_SPEC, see scripts/venv.sh (the README says which to use).
# Every other argument goes to JupyterLab (`jupyter lab`), e.g. --port 9999 or --no-browser.
# JupyterLab listens on 127.0.0.1 only and requires its token (printed below) by default.
# As root (containers, cloud VMs) JupyterLab refuses to start without --allow-root: this script adds it and
# says so.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh

labkit_args "$@"
labkit_venv lab,run "$reinstall" jupyter-lab

if [ "$(id -u)" = 0 ] && [[ " ${args[*]-} " != *" --allow-root "* ]]; then
  echo "labkit: running as root (a container or a cloud VM?): starting JupyterLab with --allow-root," \
    "which it requires for root" >&2
  args+=(--allow-root)
fi
exec .venv/bin/jupyter lab --ServerApp.ip=127.0.0.1 --notebook-dir=notebooks ${args[@]+"${args[@]}"}
