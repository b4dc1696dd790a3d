"""Tensors between the Open Inference Protocol's REST bodies and its gRPC messages (pure)."""

from __future__ import annotations

import numpy as np
import pytest

from kaliper.serving.oip_grpc import infer_request, infer_response, messages, request_arrays
from kaliper.serving.protocol import ProtocolError


def test_a_rest_body_becomes_typed_contents_with_its_id_and_requested_outputs() -> None:
    request = infer_request(
        {
            "id": "r1",
            "inputs": [
                {"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [[1.5, 2], [3, 4]]},
                {"name": "n", "shape": [2], "datatype": "INT64", "data": [7, -8]},
                {"name": "t", "shape": [1], "datatype": "BYTES", "data": ["hi"]},
                {"name": "b", "shape": [2], "datatype": "BOOL", "data": [True, False]},
            ],
            "outputs": [{"name": "label"}],
        },
        "iris",
        "3",
    )
    assert (request.model_name, request.model_version, request.id) == ("iris", "3", "r1")
    x, n, t, b = request.inputs
    assert (x.name, x.datatype, list(x.shape), list(x.contents.fp32_contents)) == ("x", "FP32", [2, 2], [1.5, 2, 3, 4])
    assert list(n.contents.int64_contents) == [7, -8]
    assert list(t.contents.bytes_contents) == [b"hi"]
    assert list(b.contents.bool_contents) == [True, False]
    assert [o.name for o in request.outputs] == ["label"]
    assert not request.raw_input_contents


def test_fp16_travels_raw_and_then_every_input_does() -> None:
    request = infer_request(
        {
            "inputs": [
                {"name": "h", "shape": [2], "datatype": "FP16", "data": [1.0, -2.0]},
                {"name": "i", "shape": [1], "datatype": "INT32", "data": [5]},
            ]
        },
        "m",
    )
    assert list(request.raw_input_contents) == [
        np.array([1.0, -2.0], "<f2").tobytes(),
        np.array([5], "<i4").tobytes(),
    ]
    assert not request.inputs[0].contents.ListFields() and not request.inputs[1].contents.ListFields()
    arrays = request_arrays(request, {"h": ("FP16", [-1]), "i": ("INT32", [1])})
    assert arrays["h"].dtype == np.float16 and arrays["h"].tolist() == [1.0, -2.0]
    assert arrays["i"].tolist() == [5]


def test_raw_bytes_elements_are_length_prefixed_both_ways() -> None:
    request = messages.ModelInferRequest(model_name="m")
    request.inputs.add(name="s", datatype="BYTES", shape=[2])
    request.raw_input_contents.append(b"\x02\x00\x00\x00ab\x00\x00\x00\x00")
    assert request_arrays(request, {"s": ("BYTES", [-1])})["s"].tolist() == [b"ab", b""]
    truncated = messages.ModelInferRequest(model_name="m")
    truncated.inputs.add(name="s", datatype="BYTES", shape=[1])
    truncated.raw_input_contents.append(b"\x05\x00")
    with pytest.raises(ProtocolError, match=r"inputs\[0\]: raw BYTES contents end inside an element's length"):
        request_arrays(truncated, {"s": ("BYTES", [-1])})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"inputs": []}, 'a JSON object with a non-empty "inputs" list'),
        ({"inputs": [{"name": "x", "shape": [1], "datatype": "FP8", "data": [1]}]}, r"inputs\[0\]\.datatype: 'FP8'"),
        (
            {"inputs": [{"name": "x", "shape": [3], "datatype": "FP32", "data": [1, 2]}]},
            r"inputs\[0\]\.data does not fit shape \[3\]",
        ),
        ({"inputs": [{"shape": [1], "datatype": "FP32", "data": [1]}]}, r"inputs\[0\] must be an object with name"),
    ],
)
def test_a_body_that_cannot_be_sent_is_refused_naming_the_input(body: dict, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        infer_request(body, "m")


def test_raw_contents_must_match_the_inputs_one_to_one() -> None:
    request = messages.ModelInferRequest(model_name="m")
    request.inputs.add(name="a", datatype="FP32", shape=[1])
    request.inputs.add(name="b", datatype="FP32", shape=[1])
    request.raw_input_contents.append(np.array([1], "<f4").tobytes())
    with pytest.raises(ProtocolError, match="raw_input_contents has 1 entries for 2 inputs"):
        request_arrays(request, {"a": ("FP32", [1]), "b": ("FP32", [1])})


def test_responses_carry_numbers_raw_and_strings_typed() -> None:
    response = infer_response(
        "m", "1", "r9", {"p": np.array([[0.25, 0.75]], np.float32), "name": np.array(["setosa"], dtype=object)}
    )
    assert (response.model_name, response.model_version, response.id) == ("m", "1", "r9")
    p, name = response.outputs
    assert (p.datatype, list(p.shape)) == ("FP32", [1, 2])
    assert list(response.raw_output_contents) == [np.array([0.25, 0.75], "<f4").tobytes()]
    assert (name.datatype, list(name.contents.bytes_contents)) == ("BYTES", [b"setosa"])
