#!/usr/bin/env bash
# A virtual environment with the pytorch extra (torch and transformers, pinned), built once outside the
# repository and kept while pyproject.toml and the pins stay the same:
#
#   hack/pytorch/venv.sh        # prints the environment's python on its last line
#
# tests/test_pytorch_conversion.py runs Kaliper with it (the checkout's code first on PYTHONPATH), so the
# conversions run for real while the project's own .venv stays without torch (its tests of what a user
# without the extra is told keep running). The default torch wheels bring CUDA's libraries: about 6.4 GB,
# 2-3 minutes to install on this machine; torch runs on the CPU here.
set -euo pipefail

TORCH_VERSION=2.15.0
TRANSFORMERS_VERSION=5.24.0

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${KALIPER_CACHE:-$HOME/.cache/kaliper}
key="torch-$TORCH_VERSION-transformers-$TRANSFORMERS_VERSION-$(sha256sum "$repo/pyproject.toml" | cut -c1-8)"
root="$cache/pytorch"
venv="$root/$key"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
# One install at a time (tests may ask from two pytest workers).
mkdir -p "$cache"
exec 9>"$cache/pytorch.lock"
flock 9

if [ -f "$venv/.installed" ]; then
  log "pytorch environment $key: cached"
else
  log "pytorch environment $key: installing (torch $TORCH_VERSION, transformers $TRANSFORMERS_VERSION)"
  # An environment for other pins or another pyproject.toml goes, as does one cut off mid-install: each is
  # gigabytes.
  rm -rf "$root" && mkdir -p "$root"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --upgrade pip
  # Kaliper's own dependencies from this checkout (its code is taken from the checkout at run time).
  "$venv/bin/python" -m pip install --quiet "$repo[pytorch]" "torch==$TORCH_VERSION" \
    "transformers==$TRANSFORMERS_VERSION"
  touch "$venv/.installed"
fi
echo "$venv/bin/python"
