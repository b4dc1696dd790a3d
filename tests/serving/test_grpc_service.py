"""The built-in server's gRPC face as a process: ModelInfer over a real HTTP/2 channel (grpcio), answers
checked against ONNX Runtime called directly, refusals with the protocol's status codes, and the calls counted
in the server's own metrics."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import onnxruntime as ort
import pytest

from kaliper.netutil import free_port
from kaliper.serving.oip_grpc import infer_request, messages, services
from tests.support.builtin_server import IRIS_ROWS as ROWS
from tests.support.builtin_server import serve
from tests.support.groundtruth import wait_http


@pytest.fixture(
    scope="module", params=[(), ("--max-batch-size", "8", "--max-queue-delay", "2ms")], ids=["unbatched", "batched"]
)
def grpc_server(request: pytest.FixtureRequest, iris: Path) -> Iterator[tuple[str, services.GRPCInferenceServiceStub]]:
    grpc_port = free_port()
    process, base = serve(iris, "--grpc-port", str(grpc_port), *request.param)
    try:
        wait_http(f"{base}/v2/health/ready")
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
            yield base, services.GRPCInferenceServiceStub(channel)
    finally:
        process.terminate()
        process.wait()


def rows_body(rows: list[list[float]], **extra: object) -> dict:
    data = [v for row in rows for v in row]
    return {"inputs": [{"name": "float_input", "shape": [len(rows), 4], "datatype": "FP32", "data": data}], **extra}


def test_model_infer_matches_onnxruntime_called_directly(grpc_server: tuple, iris: Path) -> None:
    _, stub = grpc_server
    response = stub.ModelInfer(infer_request(rows_body(ROWS, id="42"), "iris"), timeout=10)
    assert response.model_name == "iris" and response.id == "42"
    outputs = {o.name: (o, raw) for o, raw in zip(response.outputs, response.raw_output_contents, strict=True)}
    label, label_raw = outputs["label"]
    assert label.datatype == "INT64" and list(label.shape) == [3]
    labels, probabilities = ort.InferenceSession(str(iris)).run(None, {"float_input": np.array(ROWS, np.float32)})
    assert np.frombuffer(label_raw, "<i8").tolist() == labels.tolist()
    probabilities_entry, probabilities_raw = outputs["probabilities"]
    assert list(probabilities_entry.shape) == [3, 3]
    assert np.allclose(np.frombuffer(probabilities_raw, "<f4").reshape(3, 3), probabilities)


def test_raw_contents_are_read_like_typed_ones(grpc_server: tuple) -> None:
    _, stub = grpc_server
    request = messages.ModelInferRequest(model_name="iris")
    request.inputs.add(name="float_input", datatype="FP32", shape=[1, 4])
    request.raw_input_contents.append(np.array(ROWS[1], "<f4").tobytes())
    response = stub.ModelInfer(request, timeout=10)
    label = dict(zip((o.name for o in response.outputs), response.raw_output_contents, strict=True))["label"]
    assert np.frombuffer(label, "<i8").tolist() == [2]


def test_refusals_carry_the_protocol_status_and_the_reason(grpc_server: tuple) -> None:
    _, stub = grpc_server
    with pytest.raises(grpc.RpcError) as refused:
        stub.ModelInfer(
            infer_request(
                {"inputs": [{"name": "float_input", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]}, "iris"
            ),
            timeout=10,
        )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "the model takes [-1, 4] for float_input (-1: any), not [1, 3]" in refused.value.details()
    with pytest.raises(grpc.RpcError) as unknown:
        stub.ModelInfer(infer_request(rows_body(ROWS[:1]), "resnet"), timeout=10)
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    assert unknown.value.details() == "model 'resnet' is not served here; this server serves 'iris'"
    with pytest.raises(grpc.RpcError) as no_metadata:
        stub.ModelMetadata(messages.ModelMetadataRequest(name="resnet"), timeout=10)
    assert no_metadata.value.code() == grpc.StatusCode.NOT_FOUND


def test_health_metadata_and_the_calls_counted(grpc_server: tuple) -> None:
    base, stub = grpc_server
    assert stub.ServerLive(messages.ServerLiveRequest(), timeout=10).live is True
    assert stub.ModelReady(messages.ModelReadyRequest(name="iris"), timeout=10).ready is True
    assert stub.ModelReady(messages.ModelReadyRequest(name="resnet"), timeout=10).ready is False
    metadata = stub.ModelMetadata(messages.ModelMetadataRequest(name="iris"), timeout=10)
    assert [(t.name, t.datatype, list(t.shape)) for t in metadata.inputs] == [("float_input", "FP32", [-1, 4])]

    def counted(code: str) -> float:
        return metric(f'kaliper_server_grpc_requests_total{{code="{code}",model="iris"}} ')

    def metric(line: str) -> float:
        text = urllib.request.urlopen(f"{base}/metrics").read().decode()
        return float(text.split(line)[1].split()[0]) if line in text else 0.0

    timed = 'kaliper_server_request_seconds_count{model="iris"} '
    before_ok, before_refused, before_timed = counted("OK"), counted("INVALID_ARGUMENT"), metric(timed)
    for _ in range(5):
        stub.ModelInfer(infer_request(rows_body(ROWS[:1]), "iris"), timeout=10)
    with pytest.raises(grpc.RpcError):
        stub.ModelInfer(
            infer_request(
                {"inputs": [{"name": "float_input", "shape": [1, 2], "datatype": "FP32", "data": [1, 2]}]}, "iris"
            ),
            timeout=10,
        )
    assert counted("OK") - before_ok == 5
    assert counted("INVALID_ARGUMENT") - before_refused == 1
    assert metric(timed) - before_timed == 5  # the answered calls are timed, the refused one is not
