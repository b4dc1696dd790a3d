from __future__ import annotations

import sys
from pathlib import Path

from tests.support.runtimes import deployment, local_argv, pod_container

SPEC = deployment(
    model={"pvc": {"claimName": "models", "path": "iris/model.onnx"}, "name": "iris"},
    replicas=2,
    threads={"intraOp": 2, "interOp": 1, "workers": 2},
    batching={"maxBatchSize": 8, "maxQueueDelay": "3ms"},
    runtime={"args": ["--log-level", "debug"]},
)


def test_the_pod_runs_the_builtin_server_from_kaliper_image_on_both_ports() -> None:
    assert pod_container(SPEC) == {
        "image": "kaliper:test",
        "command": ["python", "-m", "kaliper.serving"],
        "args": [
            *("--model", "/models/source/iris/model.onnx", "--name", "iris", "--host", "0.0.0.0", "--port", "8080"),
            *("--grpc-port", "8081", "--intra-op", "2", "--inter-op", "1", "--workers", "2"),
            *("--max-batch-size", "8", "--max-queue-delay", "3ms", "--log-level", "debug"),
        ],
    }


def test_a_local_replica_runs_this_python_on_loopback_and_shares_its_port(tmp_path: Path) -> None:
    assert local_argv(SPEC, tmp_path, grpc_port=9001) == [
        *(sys.executable, "-m", "kaliper.serving"),
        *("--model", "/models/m.file", "--name", "m", "--host", "127.0.0.1", "--port", "9000", "--grpc-port", "9001"),
        *("--intra-op", "2", "--inter-op", "1", "--workers", "2", "--max-batch-size", "8", "--max-queue-delay", "3ms"),
        *("--reuse-port", "--log-level", "debug"),
    ]


def test_a_gpu_asks_for_cuda_and_refuses_to_start_without_it() -> None:
    gpu = deployment(model={"pvc": {"claimName": "m", "path": "a.onnx"}}, resources={"gpu": {"count": 1}})
    assert pod_container(gpu)["args"][-5:] == [
        "--require-gpu",
        *("--provider", "CUDAExecutionProvider", "--provider", "CPUExecutionProvider"),
    ]
