from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.runtimes import deployment, local_argv, pod_container

SPEC = deployment(
    model={"pvc": {"claimName": "models", "path": "qwen.gguf"}, "name": "qwen"},
    runtime={"type": "llamacpp"},
    resources={"limits": {"cpu": "1500m", "memory": "1Gi"}},
    llm={"slots": 4, "contextSize": 4096, "batchSize": 512, "ubatchSize": 128},
)


def test_the_pod_runs_llama_server_from_kaliper_image() -> None:
    assert pod_container(SPEC) == {
        "image": "kaliper:test",
        "command": ["llama-server"],
        "args": [
            *("--model", "/models/source/qwen.gguf", "--alias", "qwen", "--host", "0.0.0.0", "--port", "8080"),
            *("--parallel", "4", "--ctx-size", "4096", "--threads", "2", "--threads-batch", "2"),
            *("--batch-size", "512", "--ubatch-size", "128", "--cache-ram", "256", "--metrics", "--no-webui"),
        ],
    }


def test_a_local_replica_runs_the_cached_llama_server_on_loopback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "llama-server").write_text("#!/bin/sh\n")
    (tmp_path / "llama-server").chmod(0o755)
    monkeypatch.setenv("KALIPER_LLAMA_DIR", str(tmp_path))
    assert local_argv(SPEC, tmp_path) == [
        str(tmp_path / "llama-server"),
        *("--model", "/models/m.file", "--alias", "m", "--host", "127.0.0.1", "--port", "9000"),
        *("--parallel", "4", "--ctx-size", "4096", "--threads", "2", "--threads-batch", "2"),
        *("--batch-size", "512", "--ubatch-size", "128", "--cache-ram", "256", "--metrics", "--no-webui"),
    ]


def test_a_command_of_the_spec_replaces_the_binary_on_both_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KALIPER_LLAMA_DIR", str(tmp_path / "empty"))
    monkeypatch.setenv("KALIPER_CACHE", str(tmp_path / "no-cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))
    own = SPEC.model_copy(update={"runtime": SPEC.runtime.model_copy(update={"command": ["/opt/llama/srv"]})})
    assert pod_container(own)["command"] == ["/opt/llama/srv"]
    assert local_argv(own, tmp_path)[:3] == ["/opt/llama/srv", "--model", "/models/m.file"]
