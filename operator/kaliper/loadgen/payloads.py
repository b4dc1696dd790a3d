"""Request bodies: inline, a dataset with one request per line, or Open Inference Protocol v2 requests
generated from a tensor spec. Bodies are built once, before the load starts."""

from __future__ import annotations

import json
import random
from pathlib import Path

from kaliper.api.common import TensorSpec
from kaliper.api.profilerun import GeneratedTensors, Payload
from kaliper.jsonlines import json_lines

GENERATED_BODIES = 64  # distinct generated requests, cycled


class PayloadError(ValueError):
    """A payload that cannot be sent; the message names the file and line."""


def build_bodies(payload: Payload, seed: int | None = None, dataset_root: Path | None = None) -> list[bytes]:
    if payload.inline is not None:
        return [payload.inline.encode()]
    if payload.dataset is not None:
        if payload.dataset.file is None:
            raise PayloadError("dataset.configMap is read inside the cluster; locally, use dataset.file")
        path = Path(payload.dataset.file)
        if dataset_root is not None and not path.is_absolute():
            path = dataset_root / path
        bodies = read_dataset(path, each_json="json" in payload.content_type)
        if payload.dataset.order == "random":
            random.Random(seed).shuffle(bodies)
        return bodies
    assert payload.tensors is not None
    return generate_oip_requests(payload.tensors, seed)


def read_dataset(path: Path, each_json: bool) -> list[bytes]:
    """One request body per non-empty line; with a JSON content type every line must be valid JSON."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise PayloadError(f"cannot read dataset {path}: {exc.strerror or exc}") from exc
    lines = text.splitlines()
    if each_json:
        for _ in json_lines(lines, path, PayloadError):
            pass  # each line checked: a body that is not JSON is refused before the run
    bodies = [line.encode() for line in lines if line.strip()]
    if not bodies:
        raise PayloadError(f"dataset {path} has no requests (it is empty)")
    return bodies


def _values(spec: TensorSpec, count: int, rng: random.Random, distribution: str) -> list:
    if spec.datatype == "BOOL":
        return [rng.random() < 0.5 for _ in range(count)]
    if spec.datatype == "BYTES":
        return ["".join(rng.choice("abcdefgh") for _ in range(8)) for _ in range(count)]
    if distribution == "zeros":
        return [0] * count
    if spec.datatype.startswith(("INT", "UINT")):
        low = 0 if spec.datatype.startswith("U") else -100
        return [rng.randint(low, 100) for _ in range(count)]
    draw = (lambda: rng.gauss(0.0, 1.0)) if distribution == "normal" else (lambda: rng.uniform(0.0, 1.0))
    return [round(draw(), 6) for _ in range(count)]


def generate_oip_requests(tensors: GeneratedTensors, seed: int | None) -> list[bytes]:
    rng = random.Random(seed)
    bodies = []
    for _ in range(GENERATED_BODIES):
        inputs = []
        for spec in tensors.inputs:
            shape = [tensors.batch_size if d == -1 else d for d in spec.shape]
            count = 1
            for dimension in shape:
                count *= dimension
            inputs.append(
                {
                    "name": spec.name,
                    "shape": shape,
                    "datatype": spec.datatype,
                    "data": _values(spec, count, rng, tensors.distribution),
                }
            )
        bodies.append(json.dumps({"inputs": inputs}, separators=(",", ":")).encode())
    return bodies
