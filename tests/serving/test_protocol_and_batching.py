from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from kaliper.serving.batching import DynamicBatcher
from kaliper.serving.protocol import ProtocolError, decode_inputs, encode_outputs

EXPECTED = {"float_input": ("FP32", [-1, 2])}


def request(**tensor: object) -> dict:
    return {"inputs": [{"name": "float_input", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3, 4], **tensor}]}


def test_decode_builds_arrays_of_the_right_type_and_shape() -> None:
    arrays = decode_inputs(request(), EXPECTED)
    assert arrays["float_input"].dtype == np.float32 and arrays["float_input"].shape == (2, 2)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"instances": []}, '"inputs" list'),
        (request(name="x"), "inputs[0].name: the model has no input 'x'"),
        (request(datatype="FP64"), "the model takes FP32 for float_input, not FP64"),
        (request(datatype="FLOAT"), "not an Open Inference Protocol datatype"),
        (request(shape=[3, 2]), "does not fit shape [3, 2]"),
        (request(shape=[-1, 2]), "non-negative integers"),
        ({"inputs": []}, "missing inputs: ['float_input']"),
        (request(shape=[4, 1]), "inputs[0].shape: the model takes [-1, 2] for float_input (-1: any), not [4, 1]"),
    ],
)
def test_decode_refuses_bad_requests_with_the_reason(body: dict, message: str) -> None:
    with pytest.raises(ProtocolError) as error:
        decode_inputs(body, EXPECTED)
    assert message in str(error.value)


def test_encode_flattens_and_names_datatypes() -> None:
    response = encode_outputs(
        "m", {"label": np.array([1, 2], dtype=np.int64), "p": np.ones((2, 3), dtype=np.float32)}, request_id="r1"
    )
    assert response["id"] == "r1"
    assert response["outputs"][0] == {"name": "label", "shape": [2], "datatype": "INT64", "data": [1, 2]}
    assert response["outputs"][1]["shape"] == [2, 3] and len(response["outputs"][1]["data"]) == 6


def test_batcher_runs_concurrent_requests_as_one_batch_and_splits_the_answers() -> None:
    calls: list[int] = []

    def infer(inputs: dict) -> dict:
        x = inputs["x"]
        calls.append(x.shape[0])
        return {"y": x * 10, "constant": np.array(7)}

    async def scenario() -> list:
        batcher = DynamicBatcher(infer, max_batch_size=8, max_queue_delay_s=0.05, executor=ThreadPoolExecutor(1))
        batcher.start()
        requests = [{"x": np.full((rows, 2), i, dtype=np.float32)} for i, rows in enumerate([1, 2, 3])]
        results = await asyncio.gather(*(batcher.infer(r) for r in requests))
        await batcher.stop()
        return results

    results = asyncio.run(scenario())
    assert calls == [6]  # one run with all six rows
    for i, (outputs, timing) in enumerate(results):
        assert outputs["y"].shape == (i + 1, 2) and (outputs["y"] == i * 10).all()
        assert outputs["constant"] == 7  # no batch dimension: everyone gets it whole
        assert timing.batch_rows == 6


def test_batcher_never_exceeds_the_maximum_and_keeps_the_rest_for_the_next_batch() -> None:
    calls: list[int] = []

    def infer(inputs: dict) -> dict:
        calls.append(inputs["x"].shape[0])
        return {"y": inputs["x"]}

    async def scenario() -> None:
        batcher = DynamicBatcher(infer, max_batch_size=4, max_queue_delay_s=0.05, executor=ThreadPoolExecutor(1))
        batcher.start()
        await asyncio.gather(*(batcher.infer({"x": np.zeros((rows, 1))}) for rows in [3, 2, 1, 2]))
        await batcher.stop()

    asyncio.run(scenario())
    assert max(calls) <= 4 and sum(calls) == 8


def test_batcher_passes_model_errors_to_every_request_of_the_batch() -> None:
    def infer(inputs: dict) -> dict:
        raise RuntimeError("bad input for the graph")

    async def scenario() -> list:
        batcher = DynamicBatcher(infer, max_batch_size=8, max_queue_delay_s=0.01, executor=ThreadPoolExecutor(1))
        batcher.start()
        results = await asyncio.gather(
            *(batcher.infer({"x": np.zeros((1, 1))}) for _ in range(3)), return_exceptions=True
        )
        await batcher.stop()
        return results

    assert all(isinstance(r, RuntimeError) for r in asyncio.run(scenario()))
