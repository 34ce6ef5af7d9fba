# Sourced by scripts/lab.sh and scripts/test.sh (not run on its own): install labkit into .venv when needed.
#
#   labkit_args "$@"                  sets reinstall (non-empty if --reinstall was given) and args (the rest)
#   labkit_venv EXTRAS [reinstall] [NEED]  NEED: a command the caller runs from .venv/bin (e.g. pytest)
#
# Installs only when .venv has no record of an install of these EXTRAS for the current pyproject.toml and
# torch choice (.venv/.labkit-install-EXTRAS holds a hash of them), when the command the caller needs is
# missing from .venv, or when asked (second argument "reinstall", or LABKIT_REINSTALL=1). Otherwise it
# touches nothing and needs no network.
#
# The torch build, chosen before labkit is installed (labkit's own range, torch>=2.1,<3, then accepts it):
#   LABKIT_TORCH_INDEX=URL   torch from that package index, e.g. the PyTorch CPU index
#                            https://download.pytorch.org/whl/cpu (a laptop or VM without an NVIDIA GPU);
#   LABKIT_TORCH_SPEC=SPEC   that requirement, e.g. 'torch==2.13.0' (CI: the CPU wheel its machines hold).
# Neither: pip's default index, which on Linux gives the CUDA build.

labkit_args() {
  reinstall=
  args=()
  for a in "$@"; do
    if [ "$a" = --reinstall ]; then reinstall=reinstall; else args+=("$a"); fi
  done
}

labkit_venv() {
  local extras=$1 reinstall=${2:-} need=${3:-}
  local stamp=".venv/.labkit-install-${extras//,/-}"
  local want
  want=$(
    {
      cat pyproject.toml
      echo "extras=$extras torch_spec=${LABKIT_TORCH_SPEC:-} torch_index=${LABKIT_TORCH_INDEX:-}"
    } | cksum
  )
  if [ "${LABKIT_REINSTALL:-0}" != 1 ] && [ "$reinstall" != reinstall ] && [ -x .venv/bin/python ] &&
    { [ -z "$need" ] || [ -x ".venv/bin/$need" ]; } && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    return 0  # installed for this pyproject.toml: start offline
  fi
  echo "labkit: installing into .venv ([$extras]; this needs the network; later starts skip it until" \
    "pyproject.toml changes, or LABKIT_REINSTALL=1 / --reinstall)" >&2
  if [ ! -x .venv/bin/python ]; then
    "${PYTHON:-python3}" -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip  # editable installs need pip >= 21.3; once, at creation
  fi
  rm -f "$stamp"
  if [ -n "${LABKIT_TORCH_INDEX:-}" ]; then
    # labkit's own torch range (pyproject.toml), unless LABKIT_TORCH_SPEC names one build
    local range
    range=$(sed -n 's/^ *"\(torch[<>=!~][^"]*\)".*/\1/p' pyproject.toml | head -n 1)
    .venv/bin/python -m pip install -q --index-url "$LABKIT_TORCH_INDEX" "${LABKIT_TORCH_SPEC:-${range:-torch}}"
  elif [ -n "${LABKIT_TORCH_SPEC:-}" ]; then
    .venv/bin/python -m pip install -q "$LABKIT_TORCH_SPEC"
  fi
  .venv/bin/python -m pip install -q -e ".[$extras]"
  echo "$want" >"$stamp"
}
