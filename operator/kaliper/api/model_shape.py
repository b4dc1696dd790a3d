"""A model's dimensions as its file's header gives them, and the record of reading them for a run's fit check
(runtimes.memory estimates a server's memory from them; profiling.fit compares the estimate with a limit)."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field

from kaliper.api.base import KaliperModel


class ModelShape(KaliperModel):
    """A generative model's dimensions, as its file's header names them (GGUF: `<arch>.block_count`...)."""

    model_config = ConfigDict(frozen=True)

    weights_bytes: Annotated[int, Field(ge=0)]
    """Every tensor's data, at the types the file stores them in."""
    layers: Annotated[int, Field(ge=0)]
    """Transformer blocks (each keeps its own KV cache)."""
    embedding: Annotated[int, Field(ge=0)]
    """Width of the hidden state."""
    feed_forward: Annotated[int, Field(ge=0)]
    """Width of the feed-forward layers."""
    heads: Annotated[int, Field(ge=0)]
    """Attention (query) heads."""
    key_width: Annotated[int, Field(ge=0)]
    """Key elements one token keeps per layer in the KV cache: the key head's size times the KV heads."""
    value_width: Annotated[int, Field(ge=0)]
    """Value elements one token keeps per layer in the KV cache."""
    trained_context: Annotated[int, Field(ge=0)]
    """The context the model was trained for: llama.cpp's context when llm.contextSize is not set."""
    element_bytes: Annotated[int, Field(ge=1)] = 4
    """Bytes a weight takes as the file stores most of them (a server that casts them scales by it)."""


class ModelHeader(KaliperModel):
    """One model file a run's configurations serve, its header as the fit check read it in the cluster (a Job
    that mounts the model as the server's pod would), before any trial started."""

    model: Annotated[str, Field(max_length=512)]
    """The runtime and where the model is: `llamacpp pvc models/small.gguf`, `vllm configMap m/...`."""
    shape: ModelShape | None = None
    """What the header says; absent when it could not be read (then its configurations are not estimated)."""
    problem: Annotated[str, Field(max_length=1024)] | None = None
    """Why the header could not be read."""
