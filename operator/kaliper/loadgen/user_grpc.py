"""Open Inference Protocol calls over gRPC (oip-v2-grpc). The calls are made by a grpc.aio process beside
this one (kaliper.loadgen.grpc_process: Locust's gevent-patched processes cannot run grpc.aio); each user
here stands in for one of its users, so that spawning, stopping and spreading users over workers stay
Locust's, and its closed windows are this process's."""

from __future__ import annotations

from dataclasses import dataclass

import gevent

from kaliper.loadgen.config import LoadGenConfig
from kaliper.loadgen.generator import Generator, StageWindows
from kaliper.loadgen.grpc_calls import GrpcTarget, grpc_requests
from kaliper.loadgen.grpc_calls import preflight as grpc_preflight
from kaliper.loadgen.grpc_process import GrpcClientProcess
from kaliper.loadgen.pacing import KaliperUser
from kaliper.loadgen.payloads import build_bodies
from kaliper.loadgen.preflight import Preflight


@dataclass
class GrpcCalls:
    target: GrpcTarget
    requests: list[bytes]  # the calls' request messages, serialised once


class GrpcUser(KaliperUser):
    @classmethod
    def prepare(cls, generator: Generator) -> GrpcCalls:
        config = generator.config
        bodies = build_bodies(config.payload, config.seed)
        return GrpcCalls(GrpcTarget.for_config(config), grpc_requests(bodies, config.request.model_name or ""))

    @classmethod
    def stage_windows(cls, generator: Generator) -> StageWindows:
        return GrpcClientProcess(generator.config, generator.part)

    @classmethod
    def check(cls, generator: Generator) -> Preflight:
        calls: GrpcCalls = generator.prepared
        return grpc_preflight(calls.target, generator.config.request.model_name or "", calls.requests[0])

    @classmethod
    def connections(cls, config: LoadGenConfig) -> int | None:
        return config.grpc_channels.connections  # HTTP/2 connections, each carrying many calls

    def run(self) -> None:
        """One user of the gRPC client process for as long as Locust runs this one."""
        clients = self.generator.windows
        assert isinstance(clients, GrpcClientProcess), "started before the first stage"
        clients.user_started()
        try:
            while True:
                gevent.sleep(3600)
        finally:
            clients.user_stopped()
