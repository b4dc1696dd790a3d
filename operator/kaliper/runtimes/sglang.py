"""SGLang's server, from its upstream image on GPUs."""

from __future__ import annotations

from kaliper.api.modeldeployment import LlmServing
from kaliper.runtimes.base import Launch, LoadGauges
from kaliper.runtimes.gpu_llm import GpuLlmServer, Options


class Sglang(GpuLlmServer):
    type = "sglang"
    display_name = "SGLang"
    image = "docker.io/lmsysorg/sglang:v0.5.4"
    http_port = 30000
    shared_memory = True  # tensors between its GPU workers go through /dev/shm
    load_gauges = LoadGauges(
        "sglang:num_running_reqs", ("sglang:num_running_reqs",), ("sglang:num_queue_reqs",), ("sglang:token_usage",)
    )

    def command_line(
        self, launch: Launch, tensor: int, copies: int, llm: LlmServing
    ) -> tuple[list[str], list[str], Options]:
        program = ["python3", "-m", "sglang.launch_server"]
        args = ["--model-path", launch.model_path, "--served-model-name", launch.served_name]
        args += ["--host", launch.host, "--port", str(launch.port), "--enable-metrics"]
        options: Options = [
            ("--tp-size", tensor),
            ("--dp-size", copies if copies > 1 else None),
            ("--max-running-requests", llm.slots),
            ("--context-length", llm.max_model_length),
            ("--max-prefill-tokens", llm.max_batched_tokens),
            ("--mem-fraction-static", llm.gpu_memory_utilization),
            ("--dtype", llm.dtype),
            ("--quantization", llm.quantization),
        ]
        return program, args, options


RUNTIME = Sglang()
