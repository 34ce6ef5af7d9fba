#!/usr/bin/env bash
# Every live GPU path of labkit on this machine, each step logged and timed:
#   nvidia-smi facts, `labkit doctor`, `pytest -m "gpu or multigpu"`, the fidelity probe
#   (labkit vs raw cudaMemcpyAsync), `labkit record`, and all six notebooks executed in auto mode.
# Usage: bash scripts/gpu_check.sh OUT_DIR [--quick]      (PYTHON=... picks the interpreter;
#        ONLY="record notebooks" runs only the named steps)
# Writes OUT_DIR/<step>.log, OUT_DIR/steps.tsv (step, exit code, seconds), OUT_DIR/profile/ and
# OUT_DIR/notebooks/. A failing step is logged and the next one still runs; the exit code is the
# number of failed steps.
set -uo pipefail
OUT=${1:?usage: scripts/gpu_check.sh OUT_DIR [--quick]}
QUICK=${2:-}
PY=${PYTHON:-python3}
cd "$(dirname "$0")/.."
mkdir -p "$OUT"
: > "$OUT/steps.tsv"
failed=0
step() {  # step NAME TIMEOUT_S CMD...
  local name=$1 limit=$2; shift 2
  if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]]; then return 0; fi
  echo "== $name: $*"
  local t0 t1 rc
  t0=$(date +%s%N)
  timeout --kill-after=10 "$limit" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  t1=$(date +%s%N)
  printf '%s\t%s\t%d.%d\n' "$name" "$rc" $(( (t1 - t0) / 1000000000 )) $(( (t1 - t0) / 100000000 % 10 )) | tee -a "$OUT/steps.tsv"
  [ "$rc" -eq 0 ] || { failed=$((failed + 1)); tail -n 25 "$OUT/$name.log"; }
}
export LABKIT_HEADLESS=1 MPLBACKEND=Agg PYTHONUNBUFFERED=1

step nvidia_smi 60 bash -c 'nvidia-smi; nvidia-smi topo -m; nvidia-smi -q | grep -iA3 "link width\|pcie generation"'
step doctor 120 "$PY" -m labkit doctor
step doctor_json 120 "$PY" -m labkit doctor --json
step pytest_gpu 600 "$PY" -m pytest -q -m "gpu or multigpu" -p no:cacheprovider -o addopts="-ra" tests
step fidelity 300 "$PY" -m labkit bench fidelity --json
step record 900 "$PY" -m labkit record --out "$OUT/profile" --force $QUICK
step notebooks 1800 "$PY" -m labkit run --mode auto $QUICK --out "$OUT/notebooks"
echo "== $failed step(s) failed; logs in $OUT"
exit "$failed"
