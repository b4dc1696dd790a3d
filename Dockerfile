# One image for the operator, the load generator, the built-in model server and the model fetcher:
#   kopf run -m kaliper.controllers.main      (the chart's default)
#   python -m kaliper.loadgen run|master|worker
#   python -m kaliper.serving --model ... --name ...
#   python -m kaliper.serving.fetch URL PATH
# Pinned base, wheels built in a separate stage, runs as a non-root user. Where the base cannot be pulled,
# pass another Debian-based Python 3.11 as BASE_IMAGE (hack/image/build.sh makes one with debootstrap).
# Behind a TLS-intercepting proxy, hand pip its CA bundle as a build secret (never stored in the image):
#   --secret id=ca-bundle,src=/etc/ssl/certs/ca-certificates.crt
ARG BASE_IMAGE=python:3.11.10-slim-bookworm

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
COPY pyproject.toml README.md ./
# The dependencies' wheels first, from pyproject.toml alone (an empty package stands in for the code), so
# this layer is rebuilt only when the dependencies change.
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
 && mkdir -p operator/kaliper && touch operator/kaliper/__init__.py \
 && python -m pip wheel --no-cache-dir --no-binary=hdrhistogram --wheel-dir /wheels . \
 && rm -rf /wheels/kaliper-*.whl build operator   # the stand-in must not leak into the real build
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
COPY operator ./operator
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
 && python -m pip wheel --no-cache-dir --no-deps --wheel-dir /app .

FROM ${BASE_IMAGE}
RUN useradd --uid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin kaliper
COPY --from=build /wheels /wheels
RUN python -m pip install --no-cache-dir --no-index /wheels/*.whl && rm -rf /wheels
COPY --from=build /app /app
RUN python -m pip install --no-cache-dir --no-index --no-deps /app/*.whl && rm -rf /app
USER 10001
ENV PYTHONUNBUFFERED=1
EXPOSE 8080
CMD ["kopf", "run", "--standalone", "--all-namespaces", "-m", "kaliper.controllers.main"]
