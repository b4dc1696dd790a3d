"""A server that holds a GPU runs on a GPU execution provider or refuses to start, saying why: ONNX Runtime
itself falls back to the CPU with only a warning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnxruntime
import pytest

from kaliper.controllers.diagnosis import pod_problem
from kaliper.serving.examples import make_iris
from kaliper.serving.model import ProviderUnavailable, check_gpu_providers

NO_GPU_BUILD = (
    "the deployment requests a GPU, but this onnxruntime has no GPU execution provider (it has "
    "AzureExecutionProvider, CPUExecutionProvider; wanted CUDAExecutionProvider): build the image with "
    "--build-arg ONNXRUNTIME=onnxruntime-gpu, or install onnxruntime-gpu"
)


def test_a_session_on_the_gpu_passes() -> None:
    in_use = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    check_gpu_providers(["CUDAExecutionProvider", "CPUExecutionProvider"], in_use, in_use)


def test_a_build_without_gpu_providers_is_refused_with_the_fix() -> None:
    with pytest.raises(ProviderUnavailable) as refused:
        check_gpu_providers(
            ["CUDAExecutionProvider", "CPUExecutionProvider"], ["AzureExecutionProvider", "CPUExecutionProvider"], []
        )
    assert str(refused.value) == NO_GPU_BUILD


def test_a_gpu_provider_that_could_not_start_is_refused() -> None:
    with pytest.raises(ProviderUnavailable) as refused:
        check_gpu_providers(
            ["TensorrtExecutionProvider"],
            ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"],
            ["CPUExecutionProvider"],
        )
    assert str(refused.value) == (
        "the deployment requests a GPU, but TensorrtExecutionProvider could not start and the session runs on "
        "CPUExecutionProvider: is the GPU visible to this process (driver, CUDA libraries, NVIDIA_VISIBLE_DEVICES)?"
    )


def test_the_server_on_this_cpu_only_onnxruntime_exits_with_the_reason(tmp_path: Path) -> None:
    model = make_iris(tmp_path / "iris.onnx")
    serve = [sys.executable, "-m", "kaliper.serving", "--model", str(model), "--name", "iris", "--port", "1"]
    gpu = ["--require-gpu", "--provider", "CUDAExecutionProvider", "--provider", "CPUExecutionProvider"]
    done = subprocess.run([*serve, *gpu], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    # This machine's onnxruntime is the CPU build (what `make setup` installs).
    assert not {"CUDAExecutionProvider", "TensorrtExecutionProvider", "ROCMExecutionProvider"} & set(
        onnxruntime.get_available_providers()
    )
    assert "the deployment requests a GPU, but this onnxruntime has no GPU execution provider" in done.stderr
    assert "build the image with --build-arg ONNXRUNTIME=onnxruntime-gpu" in done.stderr


def test_a_crash_loop_reports_the_containers_termination_message() -> None:
    container = {
        "name": "server",
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {"terminated": {"exitCode": 1, "message": NO_GPU_BUILD + "\n"}},
    }
    pod = {"metadata": {"name": "iris-t0-abc-x1y2z"}, "status": {"containerStatuses": [container]}}
    problem = pod_problem([pod])
    assert problem is not None and str(problem) == (
        f"CrashLoopBackOff: container server of pod iris-t0-abc-x1y2z keeps crashing (exit code 1: {NO_GPU_BUILD}); "
        "see `kubectl logs iris-t0-abc-x1y2z`"
    )
