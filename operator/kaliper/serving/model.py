"""An ONNX Runtime session with the threading settings a deployment asks for."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort

from kaliper.serving.protocol import ONNX_TYPES


@dataclass(frozen=True)
class TensorInfo:
    name: str
    datatype: str
    shape: list[int]  # -1 for dynamic dimensions


GPU_PROVIDERS = ("CUDAExecutionProvider", "TensorrtExecutionProvider", "ROCMExecutionProvider")


class ProviderUnavailable(RuntimeError):
    """The session would not run on the execution provider the deployment needs."""


def check_gpu_providers(requested: list[str], available: list[str], in_use: list[str]) -> None:
    """ONNX Runtime falls back to the CPU, with only a warning, when a requested GPU provider is missing from
    its build or cannot start (no driver, no device): refuse that instead."""
    if any(p in GPU_PROVIDERS for p in in_use):
        return
    wanted = [p for p in requested if p in GPU_PROVIDERS] or ["CUDAExecutionProvider"]
    if not any(p in available for p in wanted):
        raise ProviderUnavailable(
            f"the deployment requests a GPU, but this onnxruntime has no GPU execution provider (it has "
            f"{', '.join(available)}; wanted {', '.join(wanted)}): build the image with "
            "--build-arg ONNXRUNTIME=onnxruntime-gpu, or install onnxruntime-gpu"
        )
    raise ProviderUnavailable(
        f"the deployment requests a GPU, but {', '.join(wanted)} could not start and the session runs on "
        f"{', '.join(in_use)}: is the GPU visible to this process (driver, CUDA libraries, NVIDIA_VISIBLE_DEVICES)?"
    )


class OnnxModel:
    def __init__(
        self,
        path: Path,
        intra_op_threads: int | None = None,
        inter_op_threads: int | None = None,
        providers: list[str] | None = None,
        require_gpu: bool = False,
    ) -> None:
        options = ort.SessionOptions()
        if intra_op_threads:
            options.intra_op_num_threads = intra_op_threads
        if inter_op_threads:
            options.inter_op_num_threads = inter_op_threads
            options.execution_mode = ort.ExecutionMode.ORT_PARALLEL
        requested = providers or ["CPUExecutionProvider"]
        if require_gpu and not any(p in ort.get_available_providers() for p in requested if p in GPU_PROVIDERS):
            check_gpu_providers(requested, ort.get_available_providers(), [])  # before loading anything
        self.session = ort.InferenceSession(str(path), options, providers=requested)
        if require_gpu:
            check_gpu_providers(requested, ort.get_available_providers(), self.session.get_providers())
        self.inputs = [self._info(i) for i in self.session.get_inputs()]
        self.outputs = [self._info(o) for o in self.session.get_outputs()]
        # skl2onnx classifiers return a list of dicts for probabilities (ZipMap); only tensor outputs are served.
        self.output_names = [o.name for o in self.outputs if o.datatype != "UNSUPPORTED"]

    @staticmethod
    def _info(arg: Any) -> TensorInfo:
        shape = [d if isinstance(d, int) else -1 for d in (arg.shape or [])]
        return TensorInfo(arg.name, ONNX_TYPES.get(arg.type, "UNSUPPORTED"), shape)

    @property
    def input_specs(self) -> dict[str, tuple[str, list[int]]]:
        return {i.name: (i.datatype, i.shape) for i in self.inputs}

    def infer(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        results = self.session.run(self.output_names, inputs)
        return {name: np.asarray(value) for name, value in zip(self.output_names, results, strict=True)}
