#!/usr/bin/env bash
# Compiles llama.cpp's llama-server (the llamacpp runtime) and llama-quantize (the GGUF quantizer of
# ModelOptimization) from a llama.cpp source tree, for generic CPUs of the build's architecture. One recipe
# for this machine (hack/llama/build.sh) and for Kaliper's image (the Dockerfile's llama stage).
#
#   hack/llama/compile.sh SRC OUT      # SRC: llama.cpp's source (vendor/llama.cpp of the llama-cpp-python sdist)
set -euo pipefail
src=$1 out=$2
[ -f "$src/CMakeLists.txt" ] || { echo "compile.sh: $src is not a llama.cpp source tree" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# GGML_NATIVE=OFF: the binaries must run on any CPU of the architecture, not only the one that built them.
# No curl, no OpenSSL (models come from volumes), no web UI (fetching it would need the network).
cmake -S "$src" -B "$work" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF \
  >"$work/cmake.log" 2>&1 || { tail -30 "$work/cmake.log" >&2; echo "compile.sh: cmake configure failed" >&2; exit 1; }
cmake --build "$work" --target llama-server llama-quantize -j "$(nproc)" >"$work/build.log" 2>&1 \
  || { tail -30 "$work/build.log" >&2; echo "compile.sh: the build failed" >&2; exit 1; }
mkdir -p "$out"
for binary in llama-server llama-quantize; do
  cp "$work/bin/$binary" "$out/$binary"
  strip "$out/$binary" 2>/dev/null || true
done
