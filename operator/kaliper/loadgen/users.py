"""The user class of each protocol, chosen once from the config: everything past this choice (stages,
windows, workers) is the same for every protocol."""

from __future__ import annotations

from kaliper.api.profilerun import Protocol
from kaliper.loadgen.config import LoadGenConfig
from kaliper.loadgen.pacing import KaliperUser
from kaliper.loadgen.user_generation import GenerationUser
from kaliper.loadgen.user_grpc import GrpcUser
from kaliper.loadgen.user_http import HttpUser

USER_CLASSES: dict[Protocol, type[KaliperUser]] = {
    "oip-v2": HttpUser,
    "http-json": HttpUser,
    "oip-v2-grpc": GrpcUser,
    "openai-chat": GenerationUser,
    "openai-completions": GenerationUser,
}


def user_class_for(config: LoadGenConfig) -> type[KaliperUser]:
    return USER_CLASSES[config.request.protocol]


def every_user_class() -> list[type[KaliperUser]]:
    """A worker learns its config from the master's first stage message, after Locust asked for its user
    classes: it knows them all, and spawns the one the master names."""
    return list(dict.fromkeys(USER_CLASSES.values()))
