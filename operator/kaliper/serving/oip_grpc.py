"""Open Inference Protocol v2 over gRPC (`inference.GRPCInferenceService`): tensors between the REST form and
the protocol's messages. Pure functions, used by the load generator (a REST body sent as a ModelInferRequest)
and by the built-in server (a ModelInferRequest read as arrays, the outputs answered as a ModelInferResponse).

The messages are the stubs tritonclient ships, compiled from Triton's `grpc_service.proto`: the KServe v2
protocol's service with the same package, names and field numbers (Triton's adds fields and methods that
MLServer lacks; none of them is used here), so the same bytes reach MLServer, Triton and Kaliper's server.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
from tritonclient.grpc import service_pb2 as messages
from tritonclient.grpc import service_pb2_grpc as services

from kaliper.serving.protocol import DTYPES, ProtocolError, datatype_of, decode_inputs

SERVICE = "inference.GRPCInferenceService"
MODEL_INFER = f"/{SERVICE}/ModelInfer"
MODEL_METADATA = f"/{SERVICE}/ModelMetadata"

# The typed field of InferTensorContents that carries each datatype; FP16 has none and travels only as raw
# little-endian bytes (raw_input_contents), which then carries every input of that request (the protocol's
# rule: raw for all inputs or for none).
CONTENTS_FIELD = {
    "BOOL": "bool_contents",
    "INT8": "int_contents",
    "INT16": "int_contents",
    "INT32": "int_contents",
    "INT64": "int64_contents",
    "UINT8": "uint_contents",
    "UINT16": "uint_contents",
    "UINT32": "uint_contents",
    "UINT64": "uint64_contents",
    "FP32": "fp32_contents",
    "FP64": "fp64_contents",
    "BYTES": "bytes_contents",
}

__all__ = ["MODEL_INFER", "MODEL_METADATA", "SERVICE", "messages", "services"]


def infer_request(body: Any, model_name: str, model_version: str = "") -> messages.ModelInferRequest:
    """The ModelInferRequest carrying a REST body's tensors ({"inputs": [{name, shape, datatype, data}],
    optional "id" and "outputs": [{name}]}). Raises ProtocolError naming the input that does not fit."""
    if not isinstance(body, dict) or not isinstance(body.get("inputs"), list) or not body["inputs"]:
        raise ProtocolError('an Open Inference Protocol body is a JSON object with a non-empty "inputs" list')
    request = messages.ModelInferRequest(model_name=model_name, model_version=model_version)
    if isinstance(body.get("id"), str):
        request.id = body["id"]
    raw = any(isinstance(t, dict) and t.get("datatype") == "FP16" for t in body["inputs"])
    for i, tensor in enumerate(body["inputs"]):
        where = f"inputs[{i}]"
        if not isinstance(tensor, dict) or not isinstance(tensor.get("name"), str):
            raise ProtocolError(f"{where} must be an object with name, shape, datatype and data")
        datatype = tensor.get("datatype")
        if datatype not in DTYPES:
            raise ProtocolError(f"{where}.datatype: {datatype!r} is not an Open Inference Protocol datatype")
        shape = tensor.get("shape")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ProtocolError(f"{where}.shape must be a list of non-negative integers")
        try:
            values = np.asarray(tensor.get("data"), dtype=DTYPES[datatype]).reshape(shape)
        except (ValueError, TypeError) as exc:
            raise ProtocolError(f"{where}.data does not fit shape {shape}: {exc}") from exc
        entry = request.inputs.add(name=tensor["name"], datatype=datatype, shape=shape)
        if raw:
            request.raw_input_contents.append(_raw_bytes(values, datatype))
        else:
            flat = values.reshape(-1).tolist()
            if datatype == "BYTES":
                flat = [v if isinstance(v, bytes) else str(v).encode() for v in flat]
            getattr(entry.contents, CONTENTS_FIELD[datatype]).extend(flat)
    for output in body.get("outputs") or []:
        if isinstance(output, dict) and isinstance(output.get("name"), str):
            request.outputs.add(name=output["name"])
    return request


def request_arrays(
    request: messages.ModelInferRequest, expected: dict[str, tuple[str, list[int]]]
) -> dict[str, np.ndarray]:
    """A ModelInferRequest's inputs as arrays, checked against the model's inputs as a REST body is (the same
    messages: the input's name, datatype and shape)."""
    raw = list(request.raw_input_contents)
    if raw and len(raw) != len(request.inputs):
        raise ProtocolError(
            f"raw_input_contents has {len(raw)} entries for {len(request.inputs)} inputs; send one per input"
        )
    tensors = []
    for i, entry in enumerate(request.inputs):
        dtype = DTYPES.get(entry.datatype)
        if dtype is None:
            data: Any = []
        elif raw:
            data = _from_raw(raw[i], entry.datatype, f"inputs[{i}]")
        else:
            data = np.asarray(list(getattr(entry.contents, CONTENTS_FIELD.get(entry.datatype, "bytes_contents"))))
        tensors.append({"name": entry.name, "shape": list(entry.shape), "datatype": entry.datatype, "data": data})
    return decode_inputs({"inputs": tensors}, expected)


def infer_response(
    model_name: str, model_version: str, request_id: str, outputs: dict[str, np.ndarray]
) -> messages.ModelInferResponse:
    """The outputs as raw little-endian bytes (as Triton answers), BYTES tensors as typed contents."""
    response = messages.ModelInferResponse(model_name=model_name, model_version=model_version, id=request_id)
    for name, array in outputs.items():
        datatype = datatype_of(array)
        entry = response.outputs.add(name=name, datatype=datatype, shape=list(array.shape))
        if datatype == "BYTES":
            flat = [v if isinstance(v, bytes) else str(v).encode() for v in array.reshape(-1).tolist()]
            entry.contents.bytes_contents.extend(flat)
        else:
            response.raw_output_contents.append(_raw_bytes(array, datatype))
    return response


def _raw_bytes(values: np.ndarray, datatype: str) -> bytes:
    if datatype == "BYTES":  # each element as a 4-byte little-endian length, then its bytes
        items = [v if isinstance(v, bytes) else str(v).encode() for v in values.reshape(-1).tolist()]
        return b"".join(struct.pack("<I", len(item)) + item for item in items)
    return np.ascontiguousarray(values, dtype=np.dtype(DTYPES[datatype]).newbyteorder("<")).tobytes()


def _from_raw(raw: bytes, datatype: str, where: str) -> np.ndarray:
    if datatype == "BYTES":
        items, at = [], 0
        while at < len(raw):
            if at + 4 > len(raw):
                raise ProtocolError(f"{where}: raw BYTES contents end inside an element's length")
            (length,) = struct.unpack_from("<I", raw, at)
            items.append(raw[at + 4 : at + 4 + length])
            at += 4 + length
        return np.asarray(items, dtype=np.object_)
    dtype = np.dtype(DTYPES[datatype]).newbyteorder("<")
    if len(raw) % dtype.itemsize:
        raise ProtocolError(f"{where}: {len(raw)} raw bytes are not a whole number of {datatype} elements")
    return np.frombuffer(raw, dtype=dtype)
