#!/usr/bin/env bash
# Installs the LLM load generators Kaliper is compared with, each into its own virtual environment under
# the cache (never into the project's .venv): AIPerf and GuideLLM on Python 3.11, inference-perf on Python
# >= 3.12. Prints nothing when all three are already there. GuideLLM brings torch with CUDA's libraries:
# about 6 GB and 3 minutes.
set -euo pipefail

AIPERF_VERSION=0.13.0
INFERENCE_PERF_VERSION=0.7.0
GUIDELLM_VERSION=0.8.1
PEERS="${KALIPER_CACHE:-$HOME/.cache/kaliper}/bench/peers"

# The first interpreter >= 3.12 that runs: $PYTHON312, pyenv's versions, then the PATH (pyenv's shims on
# the PATH answer "command not found" for versions that are not selected, hence the check).
python312() {
  for candidate in "${PYTHON312:-}" "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3 $(command -v python3.12 python3.13 || true); do
    [[ -n "$candidate" ]] && "$candidate" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null && {
      echo "$candidate"
      return
    }
  done
  echo "inference-perf needs Python >= 3.12 and none was found: set PYTHON312=/path/to/python3.12" >&2
  exit 1
}

install() { # name version python package
  local venv="$PEERS/$1-$2"
  [[ -x "$venv/bin/$1" ]] && return 0
  echo "installing $1 $2 into $venv" >&2
  rm -rf "$venv"
  "$3" -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "$4==$2"
}

install aiperf "$AIPERF_VERSION" python3.11 aiperf
install inference-perf "$INFERENCE_PERF_VERSION" "$(python312)" inference-perf
install guidellm "$GUIDELLM_VERSION" python3.11 guidellm
