"""Hugging Face's Text Generation Inference, from its upstream image on GPUs. It shards the model over every
GPU of the replica and serves whatever model a request names (it has no served-name option)."""

from __future__ import annotations

from kaliper.api.modeldeployment import LlmServing, ModelDeploymentTemplate
from kaliper.runtimes.base import BuildError, Launch, LoadGauges
from kaliper.runtimes.gpu_llm import GpuLlmServer, Options


class Tgi(GpuLlmServer):
    type = "tgi"
    display_name = "TGI"
    image = "ghcr.io/huggingface/text-generation-inference:3.3.6"
    load_gauges = LoadGauges("tgi_queue_size", ("tgi_batch_current_size",), ("tgi_queue_size",))

    def parallelism(self, spec: ModelDeploymentTemplate) -> tuple[int, int]:
        tensor, copies = super().parallelism(spec)
        if copies != 1:
            gpus = tensor * copies
            raise BuildError(
                f"spec: tgi shards the model over every GPU of the replica ({gpus}); remove llm.tensorParallel or "
                f"set it to {gpus}"
            )
        return tensor, copies

    def command_line(
        self, launch: Launch, tensor: int, copies: int, llm: LlmServing
    ) -> tuple[list[str], list[str], Options]:
        program = ["text-generation-launcher"]
        args = ["--model-id", launch.model_path, "--hostname", launch.host, "--port", str(launch.port)]
        options: Options = [
            ("--num-shard", tensor),
            ("--max-concurrent-requests", llm.slots),
            ("--max-total-tokens", llm.max_model_length),
            ("--max-batch-prefill-tokens", llm.max_batched_tokens),
            ("--cuda-memory-fraction", llm.gpu_memory_utilization),
            # TGI's --dtype forces float16 or bfloat16; without it the model's own dtype applies (auto).
            ("--dtype", llm.dtype if llm.dtype != "auto" else None),
            ("--quantize", llm.quantization),
        ]
        return program, args, options


RUNTIME = Tgi()
