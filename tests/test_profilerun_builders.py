"""The ProfileRun builders and observers, without a cluster: trial objects, load-generator Jobs, results
storage within the ConfigMap limit, and the diagnosis of pods and Jobs."""

from __future__ import annotations

import json
import re
import secrets

import pytest
import yaml

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.api.profilerun import ProfileRunSpec
from kaliper.controllers.diagnosis import job_problem, pod_problem, restarts_and_oom_kills
from kaliper.loadgen.config import LoadGenConfig
from kaliper.manifests.profilerun import (
    LoadgenPod,
    TrialLoad,
    build_loadgen,
    build_trial_deployment,
    loadgen_rbac,
    trial_objects,
)
from kaliper.report.publish import results_configmap
from kaliper.report.store import PLAIN_LIMIT, DocumentTooLarge, configmap_content, read_document

RUN = {"metadata": {"name": "r", "namespace": "ml", "uid": "u-1"}}


def spec(**extra: object) -> ProfileRunSpec:
    return ProfileRunSpec.model_validate(
        {
            "target": {"deploymentRef": {"name": "iris"}},
            "payload": {"dataset": {"configMap": {"name": "bodies", "key": "lines.jsonl"}}},
            "request": {"headersFrom": [{"name": "Authorization", "secretKeyRef": {"name": "api", "key": "token"}}]},
            "load": {"closedLoop": {"concurrency": 4}, "maxDuration": "60s", "warmup": "5s"},
            **extra,
        }
    )


def test_the_trial_deployment_is_owned_by_the_run_and_labels_its_pods() -> None:
    base = ModelDeploymentSpec.model_validate(
        {"model": {"configMap": {"name": "m", "key": "k"}}, "podLabels": {"a": "b"}}
    )
    obj = build_trial_deployment(RUN, 3, base)
    assert obj["metadata"]["name"] == "r-t3" and obj["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert obj["spec"]["podLabels"] == {
        "a": "b",
        "kaliper.dev/profilerun": "r",
        "kaliper.dev/trial": "3",
        "kaliper.dev/role": "server",
    }
    assert base.pod_labels == {"a": "b"}


def test_a_targets_prediction_check_stays_with_the_target() -> None:
    base = ModelDeploymentSpec.model_validate(
        {"model": {"configMap": {"name": "m", "key": "k"}}, "prediction": {"profile": {"run": "iris-sweep"}}}
    )
    assert "prediction" not in build_trial_deployment(RUN, 0, base)["spec"]
    assert base.prediction is not None and base.prediction.profile.run == "iris-sweep"


def test_a_single_generator_job_mounts_its_config_and_payload_and_takes_secrets_from_env() -> None:
    config_map, job = build_loadgen(
        RUN, 0, spec(), TrialLoad("http://r-t0.ml.svc:80", "iris", 16), LoadgenPod("img:1", {"requests": {"cpu": "1"}})
    )
    config = LoadGenConfig.model_validate(yaml.safe_load(config_map["data"]["config.yaml"]))
    assert config.load.closed_loop.concurrency == 16 and config.request.model_name == "iris"
    assert config.payload.dataset.file == "/etc/kaliper/payload/lines.jsonl"
    assert config.env_headers == {"Authorization": "KALIPER_HEADER_0"}
    results = yaml.safe_load(config_map["data"]["results.yaml"])["metadata"]
    assert results["name"] == "r-t0-result" and results["ownerReferences"][0]["uid"] == "u-1"
    # The load generator's identity may not update the run's finalizers (OwnerReferencesPermissionEnforcement).
    assert results["ownerReferences"][0]["blockOwnerDeletion"] is False
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["env"] == [
        {"name": "KALIPER_HEADER_0", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}}
    ]
    assert "token" not in json.dumps(config_map)  # only the reference travels, never a value
    assert container["command"][3:] == [
        "run",
        "/etc/kaliper/config.yaml",
        "--output",
        "/tmp/result.json",
        "--publish",
        "/etc/kaliper/results.yaml",
    ]
    assert {v["name"] for v in pod["volumes"]} == {"config", "tmp", "payload"}
    assert pod["serviceAccountName"] == "r-loadgen" and pod["restartPolicy"] == "Never"
    assert job["spec"]["backoffLimit"] == 0 and job["spec"]["activeDeadlineSeconds"] == 5 + 60 + 120 + 900


def test_the_trial_that_asks_the_quality_dataset_mounts_it_and_the_others_do_not_ask() -> None:
    quality = {
        "dataset": {"configMap": {"name": "questions", "key": "rows.jsonl"}},
        "scorer": "exact",
        "rows": 40,
        "maxTokens": 8,
        "floor": {"min": 0.8},
    }
    chat = {"protocol": "openai-chat", "modelName": "tiny"}
    prompts = {"prompts": {"dataset": {"configMap": {"name": "prompts", "key": "p.jsonl"}}}}
    run = spec(quality=quality, request=chat, payload=prompts)
    asks = TrialLoad("http://r-t0.ml.svc:80", "tiny", 2, scores_quality=True)
    config_map, job = build_loadgen(RUN, 0, run, asks, LoadgenPod("img:1"))
    config = LoadGenConfig.model_validate(yaml.safe_load(config_map["data"]["config.yaml"]))
    assert config.quality is not None
    assert (config.quality.file, config.quality.rows, config.quality.max_tokens) == (
        "/etc/kaliper/quality/rows.jsonl",
        40,
        8,
    )
    pod = job["spec"]["template"]["spec"]
    assert {"name": "quality", "configMap": {"name": "questions"}} in pod["volumes"]
    assert {"name": "quality", "mountPath": "/etc/kaliper/quality", "readOnly": True} in pod["containers"][0][
        "volumeMounts"
    ]
    other, _ = build_loadgen(RUN, 1, run, TrialLoad("http://r-t1.ml.svc:80", "tiny", 4), LoadgenPod("img:1"))
    assert "quality" not in yaml.safe_load(other["data"]["config.yaml"])


def test_distributed_load_is_a_master_job_its_service_and_a_worker_job() -> None:
    objects = build_loadgen(
        RUN,
        1,
        spec(load={"closedLoop": {"concurrency": 4}, "workers": 3}),
        TrialLoad("http://x", "iris", 4),
        LoadgenPod("img"),
    )
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert kinds == [("ConfigMap", "r-t1-lg"), ("Service", "r-t1-lgm"), ("Job", "r-t1-lgm"), ("Job", "r-t1-lgw")]
    master, workers = objects[2], objects[3]
    assert "--workers" in master["spec"]["template"]["spec"]["containers"][0]["command"]
    assert workers["spec"]["parallelism"] == 3
    assert workers["spec"]["template"]["spec"]["containers"][0]["command"][-2:] == ["--master", "r-t1-lgm:5557"]
    assert objects[1]["spec"]["selector"]["kaliper.dev/role"] == "loadgen-master"


def test_the_load_generator_has_an_identity_of_its_run_that_may_only_create_configmaps() -> None:
    account, role, binding = loadgen_rbac(RUN)
    assert account["metadata"]["name"] == role["metadata"]["name"] == binding["metadata"]["name"] == "r-loadgen"
    for obj in (account, role, binding):  # owned by the run: the garbage collector removes them with it
        assert [ref["uid"] for ref in obj["metadata"]["ownerReferences"]] == ["u-1"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]
    assert binding["roleRef"]["name"] == "r-loadgen"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "r-loadgen", "namespace": "ml"}]


def test_documents_are_plain_when_small_gzipped_when_large_and_refused_beyond_the_limit() -> None:
    small = configmap_content("result.json", '{"a": 1}')
    assert small == {"data": {"result.json": '{"a": 1}'}} and read_document(small, "result.json") == '{"a": 1}'
    large_text = json.dumps([{"window": i, "p99": i * 1.5} for i in range(40000)])
    assert len(large_text) > PLAIN_LIMIT
    large = configmap_content("result.json", large_text)
    assert "data" not in large and read_document(large, "result.json") == large_text
    random_hex = secrets.token_hex(1_000_000)  # gzip cannot halve random hex digits: 2 MB stays over 1 MiB
    with pytest.raises(DocumentTooLarge, match="includeTimeSeries"):
        configmap_content("result.json", random_hex)
    cm = results_configmap({"metadata": {"name": "r-t0-result", "namespace": "ml"}}, '{"a": 1}')
    assert cm["kind"] == "ConfigMap" and cm["data"] == {"result.json": '{"a": 1}'}


def pod(name: str, container: dict | None = None, scheduled: dict | None = None) -> dict:
    status: dict = {"containerStatuses": [{"name": "server", "image": "img:1", **(container or {})}]}
    if scheduled:
        status["conditions"] = [{"type": "PodScheduled", **scheduled}]
    return {"metadata": {"name": name}, "status": status}


def test_pod_problems_name_the_reason_and_whether_waiting_can_help() -> None:
    pulling = pod("p", {"state": {"waiting": {"reason": "ImagePullBackOff", "message": "not found"}}})
    assert str(pod_problem([pulling])) == "ErrImagePull: container server of pod p cannot pull image img:1: not found"
    oom = pod("p", {"state": {"running": {}}, "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}})
    assert pod_problem([oom]).reason == "OOMKilled" and pod_problem([oom]).definitive
    crash = pod(
        "p", {"state": {"waiting": {"reason": "CrashLoopBackOff"}}, "lastState": {"terminated": {"exitCode": 3}}}
    )
    assert "keeps crashing (exit code 3)" in str(pod_problem([crash]))
    unschedulable = pod("q", scheduled={"status": "False", "reason": "Unschedulable", "message": "Insufficient cpu"})
    problem = pod_problem([unschedulable, crash])
    assert problem.reason == "CrashLoopBackOff"  # the definitive one first
    assert pod_problem([unschedulable]).definitive is False
    assert pod_problem([pod("fine", {"state": {"running": {}}})]) is None


def test_a_kill_its_runtime_gave_no_reason_for_waits_for_the_next_start_to_tell() -> None:
    """containerd can report an OOM kill right after start as Error, exit code 137 (containerd#8180)."""

    def killed(restarts: int, reason: str) -> dict:
        terminated = {"exitCode": 137, "reason": reason}
        return pod("p", {"state": {"waiting": {"reason": "CrashLoopBackOff"}}, "lastState": {"terminated": terminated},
                         "restartCount": restarts})  # fmt: skip

    first = pod_problem([killed(1, "Error")])
    assert (first.reason, first.definitive) == ("Killed", False)
    assert str(first) == (
        "Killed: container server of pod p was killed (exit code 137) without a reason from its runtime; waiting "
        "for its next start to tell whether its memory limit did it"
    )
    assert pod_problem([killed(2, "OOMKilled")]).reason == "OOMKilled"
    again = pod_problem([killed(2, "Error")])
    assert (again.reason, again.definitive) == ("CrashLoopBackOff", True)
    assert "keeps crashing (exit code 137)" in again.message


def test_a_failed_job_is_explained_with_its_pods_exit() -> None:
    job = {
        "metadata": {"name": "r-t0-lg"},
        "status": {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "DeadlineExceeded",
                    "message": "Job was active longer than specified deadline",
                }
            ]
        },
    }
    failed = pod("r-t0-lg-x", {"state": {"terminated": {"exitCode": 1, "reason": "Error", "message": "unreachable"}}})
    assert job_problem(job, [failed]) == (
        "load-generator Job r-t0-lg failed: DeadlineExceeded Job was active longer than specified deadline; "
        "pod r-t0-lg-x exited with code 1 (Error): unreachable"
    )
    assert job_problem({"metadata": {"name": "j"}, "status": {}}, []) is None


def test_restarts_and_oom_kills_come_from_the_pods_status() -> None:
    healthy = pod("a", {"state": {"running": {}}, "restartCount": 0})
    assert restarts_and_oom_kills([healthy]) == (0, 0)
    killed_twice = pod(
        "b", {"state": {"running": {}}, "restartCount": 2, "lastState": {"terminated": {"reason": "OOMKilled"}}}
    )
    crashed = pod("c", {"state": {"terminated": {"reason": "Error", "exitCode": 1}}, "restartCount": 1})
    killed_now = pod("d", {"state": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}, "restartCount": 0})
    assert restarts_and_oom_kills([healthy, killed_twice, crashed, killed_now]) == (3, 2)


def test_server_pods_are_selected_by_their_template_hash_never_the_load_generators() -> None:
    regex = trial_objects("iris", 0).server_pod_regex(["7d4f9c6b58"])
    assert regex == "iris-t0-(7d4f9c6b58)-[a-z0-9]{5}"
    assert re.fullmatch(regex, "iris-t0-7d4f9c6b58-qq7zp")
    assert not re.fullmatch(regex, "iris-t0-lg-qq7zp")  # the load generator's pod
    assert not re.fullmatch(regex, "iris-t0-7d4f9c6b58-qq7zp-extra")
    assert trial_objects("iris", 1).server_pod_regex(["69f7", "5c8d", "69f7"]) == "iris-t1-(5c8d|69f7)-[a-z0-9]{5}"
    assert trial_objects("iris", 2).server_pod_regex([""]) is None


def test_one_function_names_every_object_of_a_trial() -> None:
    single = trial_objects("sweep", 3)
    assert (single.deployment, single.loadgen_config, single.jobs, single.master_service, single.results) == (
        "sweep-t3",
        "sweep-t3-lg",
        ("sweep-t3-lg",),
        None,
        "sweep-t3-result",
    )
    distributed = trial_objects("sweep", 3, workers=2)
    assert (distributed.jobs, distributed.master_service) == (("sweep-t3-lgm", "sweep-t3-lgw"), "sweep-t3-lgm")


def test_load_generators_keep_off_the_server_node_and_go_where_they_are_told() -> None:
    server_pods = {
        "matchLabels": {"kaliper.dev/profilerun": "r", "kaliper.dev/trial": "2", "kaliper.dev/role": "server"}
    }
    term = {"labelSelector": server_pods, "topologyKey": "kubernetes.io/hostname"}
    placed = LoadgenPod("img", node_selector={"pool": "load"}, tolerations=[{"key": "load", "operator": "Exists"}])
    _, job = build_loadgen(RUN, 2, spec(), TrialLoad("http://x", "iris", 4), placed)
    pod = job["spec"]["template"]["spec"]
    assert pod["affinity"] == {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    assert pod["nodeSelector"] == {"pool": "load"} and pod["tolerations"] == [{"key": "load", "operator": "Exists"}]
    _, job = build_loadgen(
        RUN, 2, spec(), TrialLoad("http://x", "iris", 4), LoadgenPod("img", anti_affinity="preferred")
    )
    preferred = job["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert preferred == {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]}
    _, job = build_loadgen(RUN, 2, spec(), TrialLoad("http://x", "iris", 4), LoadgenPod("img", anti_affinity="none"))
    assert "affinity" not in job["spec"]["template"]["spec"]
    with pytest.raises(ValueError) as refused:
        LoadgenPod("img", anti_affinity="sometimes")
    assert str(refused.value) == "loadGenerator.antiAffinity is 'sometimes'; use required, preferred or none"


def test_prompts_and_tokenizer_from_config_maps_are_mounted_into_the_generator() -> None:
    run_spec = spec(
        request={"protocol": "openai-chat", "modelName": "tiny"},
        payload={
            "prompts": {
                "dataset": {"configMap": {"name": "chats", "key": "rows.jsonl"}},
                "tokenizer": {"configMap": {"name": "tok", "key": "tokenizer.json"}},
            }
        },
    )
    config_map, job = build_loadgen(
        RUN, 0, run_spec, TrialLoad("http://llm:8080", "tiny", 4), LoadgenPod(image="kaliper:test")
    )
    config = LoadGenConfig.model_validate(yaml.safe_load(config_map["data"]["config.yaml"]))
    assert config.payload.prompts is not None
    assert config.payload.prompts.dataset is not None
    assert config.payload.prompts.dataset.file == "/etc/kaliper/payload/rows.jsonl"
    assert config.payload.prompts.tokenizer is not None
    assert config.payload.prompts.tokenizer.file == "/etc/kaliper/tokenizer/tokenizer.json"
    assert config.path == "/v1/chat/completions"
    pod = job["spec"]["template"]["spec"]
    assert {v["name"]: v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v} == {
        "config": "r-t0-lg",
        "payload": "chats",
        "tokenizer": "tok",
    }
    assert [m["mountPath"] for m in pod["containers"][0]["volumeMounts"]] == [
        "/etc/kaliper",
        "/tmp",
        "/etc/kaliper/payload",
        "/etc/kaliper/tokenizer",
    ]


def test_a_trace_from_a_config_map_is_mounted_and_replayed_at_the_trials_speedup() -> None:
    run_spec = spec(
        request={"protocol": "openai-completions", "modelName": "tiny"},
        payload={
            "prompts": {
                "trace": {"configMap": {"name": "traces", "key": "burst.csv"}, "format": "azure"},
                "tokenizer": {"configMap": {"name": "tok", "key": "tokenizer.json"}},
            }
        },
        load={"trace": {"speedup": 3, "start": "5s", "duration": "20s"}, "warmup": "2s"},
    )
    config_map, job = build_loadgen(
        RUN, 0, run_spec, TrialLoad("http://llm:8080", "tiny", 3), LoadgenPod(image="kaliper:test")
    )
    config = LoadGenConfig.model_validate(yaml.safe_load(config_map["data"]["config.yaml"]))
    assert config.payload.prompts is not None and config.payload.prompts.trace is not None
    assert config.payload.prompts.trace.model_dump(exclude_none=True) == {
        "file": "/etc/kaliper/payload/burst.csv",
        "format": "azure",
        "block_tokens": 512,
    }
    assert config.load.trace is not None
    assert (config.load.trace.speedup, config.load.trace.start, config.load.trace.duration) == (3, "5s", "20s")
    assert config.stage_levels == [3] and config.open_loop
    pod = job["spec"]["template"]["spec"]
    assert {v["name"]: v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v} == {
        "config": "r-t0-lg",
        "payload": "traces",
        "tokenizer": "tok",
    }


def test_a_trace_on_one_machines_disk_cannot_reach_a_load_generator_pod() -> None:
    from kaliper.profiling.plan import machine_paths_problem

    run_spec = spec(
        request={"protocol": "openai-completions", "modelName": "tiny"},
        payload={
            "prompts": {
                "trace": {"file": "burst.jsonl", "format": "mooncake"},
                "tokenizer": {"configMap": {"name": "tok", "key": "tokenizer.json"}},
            }
        },
        load={"trace": {}},
    )
    assert machine_paths_problem(run_spec) == (
        "spec.payload.prompts.trace.file is a path on one machine; on Kubernetes put the file in a ConfigMap and "
        "use payload.prompts.trace.configMap"
    )


def test_a_protocol_sweeps_trial_config_speaks_its_own_protocol() -> None:
    swept = spec(
        payload={"tensors": {"inputs": [{"name": "float_input", "shape": [-1, 4], "datatype": "FP32"}]}},
        request={"grpc": {"connections": 3, "streamsPerConnection": 8}},
        sweep={"protocol": ["oip-v2", "oip-v2-grpc"]},
    )

    def config_of(protocol: str) -> LoadGenConfig:
        config_map, _ = build_loadgen(
            RUN, 0, swept, TrialLoad("http://r-t0.ml.svc:8081", "iris", 4, 1, protocol), LoadgenPod("img")
        )
        return LoadGenConfig.model_validate(yaml.safe_load(config_map["data"]["config.yaml"]))

    grpc = config_of("oip-v2-grpc")
    assert (grpc.request.protocol, grpc.grpc, grpc.grpc_channels.connections) == ("oip-v2-grpc", True, 3)
    assert grpc.path == "/inference.GRPCInferenceService/ModelInfer"
    rest = config_of("oip-v2")
    # The REST trial keeps no gRPC settings: they belong to the gRPC trials of the sweep.
    assert (rest.request.protocol, rest.request.grpc, rest.path) == ("oip-v2", None, "/v2/models/iris/infer")
