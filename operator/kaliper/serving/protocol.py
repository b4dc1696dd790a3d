"""Open Inference Protocol v2 (KServe v2) tensors as JSON, to and from numpy. Pure functions."""

from __future__ import annotations

from typing import Any

import numpy as np

# OIP datatype <-> numpy dtype, and ONNX's type strings ("tensor(float)") -> OIP datatype.
DTYPES: dict[str, Any] = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
    "BYTES": np.object_,
}
ONNX_TYPES = {
    "tensor(bool)": "BOOL",
    "tensor(uint8)": "UINT8",
    "tensor(uint16)": "UINT16",
    "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64",
    "tensor(int8)": "INT8",
    "tensor(int16)": "INT16",
    "tensor(int32)": "INT32",
    "tensor(int64)": "INT64",
    "tensor(float16)": "FP16",
    "tensor(float)": "FP32",
    "tensor(double)": "FP64",
    "tensor(string)": "BYTES",
}


class ProtocolError(ValueError):
    """A request that does not follow the protocol or the model's inputs; answered with 400."""


def decode_inputs(request: Any, expected: dict[str, tuple[str, list[int]]]) -> dict[str, np.ndarray]:
    """The request's input tensors as arrays, checked against the model's inputs: name -> (datatype, shape),
    where -1 in the shape is a dimension of any size."""
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list):
        raise ProtocolError('the body must be a JSON object with an "inputs" list')
    arrays: dict[str, np.ndarray] = {}
    for i, tensor in enumerate(request["inputs"]):
        where = f"inputs[{i}]"
        if not isinstance(tensor, dict):
            raise ProtocolError(f"{where} must be an object with name, shape, datatype and data")
        name = tensor.get("name")
        if name not in expected:
            raise ProtocolError(f"{where}.name: the model has no input {name!r}; its inputs are {sorted(expected)}")
        datatype = tensor.get("datatype")
        if datatype not in DTYPES:
            raise ProtocolError(f"{where}.datatype: {datatype!r} is not an Open Inference Protocol datatype")
        wanted_type, wanted_shape = expected[name]
        if datatype != wanted_type:
            raise ProtocolError(f"{where}.datatype: the model takes {wanted_type} for {name}, not {datatype}")
        shape = tensor.get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ProtocolError(f"{where}.shape must be a list of non-negative integers")
        if wanted_shape and (
            len(shape) != len(wanted_shape) or any(w >= 0 and w != d for w, d in zip(wanted_shape, shape, strict=True))
        ):
            raise ProtocolError(f"{where}.shape: the model takes {wanted_shape} for {name} (-1: any), not {shape}")
        try:
            array = np.asarray(tensor.get("data"), dtype=DTYPES[datatype]).reshape(shape)
        except (ValueError, TypeError) as exc:
            raise ProtocolError(f"{where}.data does not fit shape {shape}: {exc}") from exc
        arrays[name] = array
    missing = set(expected) - set(arrays)
    if missing:
        raise ProtocolError(f"missing inputs: {sorted(missing)}")
    return arrays


def encode_outputs(model_name: str, outputs: dict[str, np.ndarray], request_id: str | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {
        "model_name": model_name,
        "outputs": [
            {
                "name": name,
                "shape": list(array.shape),
                "datatype": datatype_of(array),
                "data": array.reshape(-1).tolist(),
            }
            for name, array in outputs.items()
        ],
    }
    if request_id:
        response["id"] = request_id
    return response


def datatype_of(array: np.ndarray) -> str:
    for name, dtype in DTYPES.items():
        if array.dtype == dtype:
            return name
    return "BYTES"
