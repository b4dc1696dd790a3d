#!/usr/bin/env bash
# Builds (or reuses) llama.cpp's `llama-server`, the real OpenAI-compatible streaming server the LLM tests
# load-test and the llamacpp runtime runs, and `llama-quantize`, ModelOptimization's GGUF quantizer. Debian has no llama.cpp package and release downloads are out of reach, but PyPI's
# llama-cpp-python sdist carries llama.cpp's whole source under vendor/llama.cpp: CMake builds the server
# from that folder alone.
#
#   hack/llama/build.sh            # prints the binary's path on its last line
#
# The binaries land in $KALIPER_CACHE (default ~/.cache/kaliper) under bin/llama.cpp-<version>/, so a second
# run is a no-op; hack/image/build.sh hands that folder to the image build, which then need not compile them
# again. About 6-15 minutes on two cores the first time (hack/llama/compile.sh holds the recipe).
set -euo pipefail

# The llama-cpp-python release whose vendored llama.cpp we build (also pinned in the Dockerfile and in
# kaliper/runtimes/llamacpp.py: LLAMA_CPP_PYTHON_VERSION).
LLAMA_CPP_PYTHON_VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
cache=${KALIPER_CACHE:-$HOME/.cache/kaliper}
dest="$cache/bin/llama.cpp-$LLAMA_CPP_PYTHON_VERSION"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { echo "llama/build.sh: $*" >&2; exit 1; }

# One build at a time: make test's two pytest workers and the image build may all ask for it (the others wait,
# then find it cached).
mkdir -p "$cache/bin"
exec 9>"$cache/llama.lock"
flock 9
if [ -x "$dest/llama-server" ] && [ -x "$dest/llama-quantize" ]; then
  log "llama.cpp $LLAMA_CPP_PYTHON_VERSION: cached"
  echo "$dest/llama-server"
  exit 0
fi
for tool in cmake ninja g++; do
  command -v "$tool" >/dev/null || die "$tool is not installed (make system-deps installs it)"
done
python=${PYTHON:-python3}

start=$(date +%s)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
log "llama.cpp $LLAMA_CPP_PYTHON_VERSION: fetching the llama-cpp-python sdist from PyPI"
"$python" -m pip download --quiet --no-deps --no-binary :all: --dest "$work" \
  "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" || die "could not download llama-cpp-python $LLAMA_CPP_PYTHON_VERSION"
tar -xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
src=$(echo "$work"/llama_cpp_python-*/vendor/llama.cpp)
[ -f "$src/CMakeLists.txt" ] || die "the sdist has no vendor/llama.cpp"

log "llama.cpp: building llama-server and llama-quantize (about 6-15 minutes on two cores)"
rm -rf "$dest.tmp"
bash "$(dirname "${BASH_SOURCE[0]}")/compile.sh" "$src" "$dest.tmp"
rm -rf "$dest" && mv "$dest.tmp" "$dest"
log "llama.cpp $LLAMA_CPP_PYTHON_VERSION: built in $(( $(date +%s) - start ))s"
echo "$dest/llama-server"
