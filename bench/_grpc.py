"""The gRPC benchmarks' peer: ghz (a gRPC load tool in Go, installed with `go install` into the cache on first
use), and what it needs to call the Open Inference Protocol's ModelInfer without the .proto file: a protoset
(FileDescriptorSet) written from the descriptors compiled into the stubs Kaliper calls with, and the request
as serialised bytes."""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path
from typing import Any

from _common import BENCH  # noqa: F401  (puts the repository on sys.path)
from google.protobuf import descriptor_pb2
from tests.support.groundtruth import CACHE

from kaliper.serving.oip_grpc import infer_request, messages

GHZ_VERSION = "v0.121.0"
REQUEST = {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}


def ghz() -> Path:
    binary = CACHE / f"ghz-{GHZ_VERSION}"
    if not binary.exists():
        gobin = CACHE / f"ghz-{GHZ_VERSION}.build"
        subprocess.run(
            ["go", "install", f"github.com/bojand/ghz/cmd/ghz@{GHZ_VERSION}"],
            check=True,
            env={**os.environ, "GOBIN": str(gobin), "CGO_ENABLED": "0"},
        )
        (gobin / "ghz").rename(binary)
    return binary


def protoset(directory: Path) -> Path:
    """inference.GRPCInferenceService's descriptors, with the files they import, as ghz reads them."""
    files: dict[str, Any] = {}

    def add(file: Any) -> None:
        for dependency in file.dependencies:
            add(dependency)
        if file.name not in files:
            proto = descriptor_pb2.FileDescriptorProto()
            file.CopyToProto(proto)
            files[file.name] = proto

    add(messages.DESCRIPTOR)
    path = directory / "inference.protoset"
    path.write_bytes(descriptor_pb2.FileDescriptorSet(file=list(files.values())).SerializeToString())
    return path


def request_file(directory: Path) -> Path:
    path = directory / "request.bin"
    path.write_bytes(infer_request(REQUEST, "truth").SerializeToString())
    return path


def run_ghz(
    address: str, directory: Path, concurrency: int, connections: int, duration_s: int, cpus: str | None = None
) -> dict[str, Any]:
    """ghz's JSON summary of a closed-loop run: `concurrency` workers over `connections` connections."""
    command = [
        str(ghz()),
        "--insecure",
        "--protoset",
        str(protoset(directory)),
        "--call",
        "inference.GRPCInferenceService/ModelInfer",
        "--binary-file",
        str(request_file(directory)),
        "--concurrency",
        str(concurrency),
        "--connections",
        str(connections),
        "--duration",
        f"{duration_s}s",
        "--format",
        "json",
        address,
    ]
    if cpus:
        command = ["taskset", "-c", cpus, *command]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    summary = json.loads(out)
    # The CPU time ghz used over its whole run (the only child reaped meanwhile): its calls per CPU second.
    summary["cpuSeconds"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return summary


def kaliper_config(base: str, load: dict[str, Any], connections: int) -> dict[str, Any]:
    return {
        "url": base,
        "request": {"protocol": "oip-v2-grpc", "modelName": "truth", "grpc": {"connections": connections}},
        "payload": {"inline": json.dumps(REQUEST)},
        "load": load,
    }
