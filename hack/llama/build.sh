#!/usr/bin/env bash
# Builds (or reuses) llama.cpp's `llama-server`, the real OpenAI-compatible streaming server the LLM tests
# load-test. Debian has no llama.cpp package and release downloads are out of reach, but PyPI's
# llama-cpp-python sdist carries llama.cpp's whole source under vendor/llama.cpp: CMake builds the server
# from that folder alone.
#
#   hack/llama/build.sh            # prints the binary's path on its last line
#
# The binary lands in $KALIPER_CACHE (default ~/.cache/kaliper) under bin/llama-server-<version>/, so a
# second run is a no-op. About 15 minutes on two busy cores the first time.
set -euo pipefail

# The llama-cpp-python release whose vendored llama.cpp we build.
LLAMA_CPP_PYTHON_VERSION=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
cache=${KALIPER_CACHE:-$HOME/.cache/kaliper}
dest="$cache/bin/llama-server-$LLAMA_CPP_PYTHON_VERSION"
log() { echo "[$(date +%H:%M:%S)] $*" >&2; }
die() { echo "llama/build.sh: $*" >&2; exit 1; }

if [ -x "$dest/llama-server" ]; then
  log "llama-server $LLAMA_CPP_PYTHON_VERSION: cached"
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
log "llama-server $LLAMA_CPP_PYTHON_VERSION: fetching the llama-cpp-python sdist from PyPI"
"$python" -m pip download --quiet --no-deps --no-binary :all: --dest "$work" \
  "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" || die "could not download llama-cpp-python $LLAMA_CPP_PYTHON_VERSION"
tar -xzf "$work"/llama_cpp_python-*.tar.gz -C "$work"
src=$(echo "$work"/llama_cpp_python-*/vendor/llama.cpp)
[ -f "$src/CMakeLists.txt" ] || die "the sdist has no vendor/llama.cpp"

# GGML_NATIVE=OFF: the cached binary must run on any x86-64 machine of this kind, not just the one that
# built it. The web UI is not wanted (and fetching it would need the network).
log "llama-server: building (about 15 minutes on two cores)"
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF \
  >"$work/cmake.log" 2>&1 || { tail -30 "$work/cmake.log" >&2; die "cmake configure failed"; }
cmake --build "$work/build" --target llama-server -j "$(nproc)" >"$work/build.log" 2>&1 \
  || { tail -30 "$work/build.log" >&2; die "the build failed"; }

mkdir -p "$dest.tmp"
cp "$work/build/bin/llama-server" "$dest.tmp/llama-server"
strip "$dest.tmp/llama-server" || true
rm -rf "$dest" && mv "$dest.tmp" "$dest"
log "llama-server $LLAMA_CPP_PYTHON_VERSION: built in $(( $(date +%s) - start ))s"
echo "$dest/llama-server"
