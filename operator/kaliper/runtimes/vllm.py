"""vLLM's OpenAI-compatible server, from its upstream image on GPUs."""

from __future__ import annotations

from kaliper.api.modeldeployment import LlmServing
from kaliper.runtimes.base import Launch, LoadGauges, TokenCounters
from kaliper.runtimes.gpu_llm import GpuLlmServer, Options


class Vllm(GpuLlmServer):
    type = "vllm"
    display_name = "vLLM"
    image = "docker.io/vllm/vllm-openai:v0.11.0"
    http_port = 8000
    shared_memory = True  # tensors between its GPU workers go through /dev/shm
    load_gauges = LoadGauges(
        "vllm:num_requests_running",
        ("vllm:num_requests_running",),
        ("vllm:num_requests_waiting",),
        ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),  # renamed in v0.10
        ("vllm:num_preemptions_total", "vllm:num_preemptions"),
    )
    # It counts generated tokens as it makes them, so streams in flight at the edges count there in part.
    token_counters = TokenCounters(
        output_tokens="vllm:generation_tokens_total",
        input_tokens=("vllm:prompt_tokens_total",),
        input_definition="input tokens",
        ttft_histogram="vllm:time_to_first_token_seconds",
        # inter_token_latency_seconds since v0.11, time_per_output_token_seconds before
        itl_histograms=("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
    )

    def command_line(
        self, launch: Launch, tensor: int, copies: int, llm: LlmServing
    ) -> tuple[list[str], list[str], Options]:
        program = ["python3", "-m", "vllm.entrypoints.openai.api_server"]
        args = ["--model", launch.model_path, "--served-model-name", launch.served_name]
        args += ["--host", launch.host, "--port", str(launch.port)]
        options: Options = [
            ("--tensor-parallel-size", tensor),
            ("--pipeline-parallel-size", copies if copies > 1 else None),
            ("--max-num-seqs", llm.slots),
            ("--max-model-len", llm.max_model_length),
            ("--max-num-batched-tokens", llm.max_batched_tokens),
            ("--gpu-memory-utilization", llm.gpu_memory_utilization),
            ("--dtype", llm.dtype),
            ("--quantization", llm.quantization),
        ]
        return program, args, options


RUNTIME = Vllm()
