# One image for the operator, the load generator, the built-in model server and the model fetcher:
#   kopf run -m kaliper.controllers.main      (the chart's default)
#   python -m kaliper.loadgen run|master|worker
#   python -m kaliper.serving --model ... --name ...
#   python -m kaliper.serving.fetch URL PATH
#   llama-server ... / llama-quantize ...      (the llamacpp runtime, ModelOptimization's GGUF quantizer)
# Pinned base, wheels built in a separate stage, runs as a non-root user. Where the base cannot be pulled,
# pass another Debian-based Python 3.11 as BASE_IMAGE (hack/image/build.sh makes one with debootstrap).
# Behind a TLS-intercepting proxy, hand pip its CA bundle as a build secret (never stored in the image):
#   --secret id=ca-bundle,src=/etc/ssl/certs/ca-certificates.crt
ARG BASE_IMAGE=python:3.11.10-slim-bookworm

# llama.cpp's llama-server and llama-quantize, compiled from the llama.cpp source vendored in the pinned
# llama-cpp-python sdist, for generic CPUs of the target architecture (x86-64, arm64), by the same recipe as
# hack/llama/build.sh. hack/image/build.sh hands in the binaries that script already compiled on this
# machine (`--build-context llama=DIR` replaces this stage), so they are compiled once per version.
FROM ${BASE_IMAGE} AS llama-compile
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake ninja-build g++ binutils \
 && rm -rf /var/lib/apt/lists/*
ARG LLAMA_CPP_PYTHON_VERSION=0.3.36
COPY hack/llama/compile.sh /usr/local/bin/compile-llama
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
 && python -m pip download --no-cache-dir --no-deps --no-binary :all: --dest /tmp/sdist \
      "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" \
 && tar -xzf /tmp/sdist/llama_cpp_python-*.tar.gz -C /tmp/sdist \
 && bash /usr/local/bin/compile-llama /tmp/sdist/llama_cpp_python-*/vendor/llama.cpp /out \
 && rm -rf /tmp/sdist
FROM scratch AS llama
COPY --from=llama-compile /out/ /

FROM ${BASE_IMAGE} AS build
# A C compiler (and Python's headers where the base lacks them) for dependencies without a wheel for the
# platform: hdrhistogram ships x86_64 wheels only, so arm64 nodes and Apple-silicon kind hosts compile it.
# It is compiled from source everywhere (below), so every build proves that path. Only this stage has gcc.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && (python -c "import os, sysconfig; assert os.path.exists(sysconfig.get_path('include') + '/Python.h')" \
     || apt-get install -y --no-install-recommends python3-dev) \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml ./
# The dependencies' wheels first, from pyproject.toml alone (an empty package and an empty README stand in for
# the code and the package's description), so this layer is rebuilt only when the dependencies change, not
# whenever the README does.
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
 && mkdir -p operator/kaliper && touch operator/kaliper/__init__.py README.md \
 && python -m pip wheel --no-cache-dir --no-binary=hdrhistogram --wheel-dir /wheels . \
 && rm -rf /wheels/kaliper-*.whl build operator README.md   # the stand-ins must not leak into the real build
# GPU nodes: --build-arg ONNXRUNTIME=onnxruntime-gpu puts ONNX Runtime's CUDA build in place of the CPU one
# (the same `onnxruntime` module; its CUDA and cuDNN libraries come from the base, such as an nvidia/cuda
# runtime image with Python 3.11 as BASE_IMAGE). Without it, a trial that requests a GPU fails with that reason
# instead of serving on the CPU while it holds the GPU.
ARG ONNXRUNTIME=onnxruntime
RUN --mount=type=secret,id=ca-bundle \
    if [ "$ONNXRUNTIME" != onnxruntime ]; then \
      if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi; \
      rm -f /wheels/onnxruntime-[0-9]*.whl \
      && python -m pip wheel --no-cache-dir --no-deps --wheel-dir /wheels "$ONNXRUNTIME"; \
    fi
COPY README.md ./
COPY operator ./operator
# A hash of the sources (hack/image/build.sh passes it): buildah's layer cache does not look into what a RUN
# mounts from another stage, so without it a changed operator reached no image (the steps below were "cached").
ARG SOURCE_KEY=unset
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
 && echo "sources $SOURCE_KEY" \
 && python -m pip wheel --no-cache-dir --no-deps --wheel-dir /app .

FROM ${BASE_IMAGE}
RUN useradd --uid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin kaliper
# llama.cpp's binaries need the C++ runtime and GNU OpenMP.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libstdc++6 libgomp1 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=llama /llama-server /llama-quantize /usr/local/bin/
# The wheels are mounted from the build stage, not copied: a COPY keeps them in a layer of their own (193 MB)
# that every node pulls although the next step deletes them.
ARG DEPS_KEY=unset
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    echo "dependencies $DEPS_KEY" && python -m pip install --no-cache-dir --no-index /wheels/*.whl
# Kaliper's own wheel (under a megabyte) is copied, not mounted: with buildah 1.28, this step mounting /app from a
# build stage whose steps all came from the cache found nothing there ("couldn't find .../merged/app on host"),
# every time, after an image build had been cut off part way.
COPY --from=build /app/ /tmp/app/
RUN python -m pip install --no-cache-dir --no-index --no-deps /tmp/app/*.whl && rm -rf /tmp/app
USER 10001
ENV PYTHONUNBUFFERED=1
EXPOSE 8080
CMD ["kopf", "run", "--standalone", "--all-namespaces", "-m", "kaliper.controllers.main"]
