from __future__ import annotations

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.profiling.plan import configurations, sweep_problem, trial_protocol
from kaliper.profiling.search import Outcome, dominates, order_for_search
from tests.support.specs import BASE, spec


def test_grid_expands_every_combination_with_its_levels() -> None:
    planned = configurations(spec(sweep={"cpu": ["500m", 1], "batchSize": [1, 8], "concurrency": [8, 2]}), BASE)
    assert [c.parameters for c in planned] == [
        {"cpu": "500m", "batch_size": "1"},
        {"cpu": "500m", "batch_size": "8"},
        {"cpu": "1", "batch_size": "1"},
        {"cpu": "1", "batch_size": "8"},
    ]
    assert all(c.levels == [2.0, 8.0] and c.level_name == "concurrency" for c in planned)
    first, second = planned[0].deployment, planned[1].deployment
    # A swept CPU sets request and limit (Guaranteed QoS); other resources are kept.
    assert first.resources.requests.cpu == first.resources.limits.cpu == "500m"
    assert first.resources.requests.memory == "1Gi"
    assert first.batching is None and second.batching.max_batch_size == 8
    assert BASE.resources.limits is None  # the base is not modified


def test_without_a_sweep_there_is_one_configuration_at_the_load_level() -> None:
    (only,) = configurations(spec(), BASE)
    assert only.parameters == {} and only.levels == [2.0]


def test_model_variants_threads_replicas_runtime() -> None:
    planned = configurations(
        spec(
            sweep={
                "threads": [2],
                "replicas": [3],
                "runtime": ["onnxruntime"],
                "modelVariants": [{"name": "int8", "model": {"file": "int8.onnx"}}],
            }
        ),
        BASE,
    )
    deployment = planned[0].deployment
    assert planned[0].parameters == {"replicas": "3", "threads": "2", "runtime": "onnxruntime", "model_variant": "int8"}
    assert deployment.threads.intra_op == 2 and deployment.replicas == 3 and deployment.model.file == "int8.onnx"


def test_a_protocol_sweep_is_a_trial_per_protocol_on_the_same_deployment() -> None:
    run = spec(sweep={"cpu": ["1"], "protocol": ["oip-v2", "oip-v2-grpc"]})
    rest, grpc = configurations(run, BASE)
    assert (rest.parameters, grpc.parameters) == (
        {"cpu": "1", "protocol": "oip-v2"},
        {"cpu": "1", "protocol": "oip-v2-grpc"},
    )
    assert rest.deployment == grpc.deployment  # the protocol changes the requests, not the server
    assert (trial_protocol(run, rest.parameters), trial_protocol(run, grpc.parameters)) == ("oip-v2", "oip-v2-grpc")
    assert trial_protocol(spec(request={"protocol": "oip-v2-grpc"}), {}) == "oip-v2-grpc"
    assert sweep_problem(run, [rest, grpc]) is None


def test_grpc_trials_of_a_runtime_without_the_grpc_service_are_refused() -> None:
    llama = ModelDeploymentSpec.model_validate({"model": {"file": "m.gguf"}, "runtime": {"type": "llamacpp"}})
    run = spec(sweep={"protocol": ["oip-v2", "oip-v2-grpc"]})
    assert sweep_problem(run, configurations(run, llama)) == (
        "configuration protocol=oip-v2-grpc: oip-v2-grpc calls the Open Inference Protocol's gRPC service, which "
        "runtime llamacpp does not serve (onnxruntime, mlserver and triton do; a custom runtime names its port in "
        "runtime.grpcPort)"
    )


def cores_of(config) -> float:  # type: ignore[no-untyped-def]
    value = config.parameters["cpu"]
    return float(value[:-1]) / 1000 if value.endswith("m") else float(value)


def test_knee_search_binary_searches_levels_and_skips_what_cannot_win() -> None:
    s = spec(sweep={"cpu": ["2", "500m", "1"], "concurrency": [1, 4, 16]}, search={"strategy": "knee"})
    steps = order_for_search(s, configurations(s, BASE), cores_of)

    cheapest = next(steps)
    assert cheapest.configuration.parameters["cpu"] == "500m" and cheapest.run
    assert cheapest.next_level({}) == 4  # the middle level first
    assert cheapest.next_level({4: True}) == 16
    assert cheapest.next_level({4: True, 16: False}) is None  # the knee is 4; level 1 is implied
    assert cheapest.skip_reason(1, {4: True, 16: False}) == "a higher load level met the SLO; this one would too"
    assert cheapest.skip_reason(16, {4: False, 1: True}) == "a lower load level did not meet the SLO"
    cheapest.on_done({4: True, 16: False}, [])

    middle = next(steps)
    assert middle.configuration.parameters["cpu"] == "1"
    # It has more CPU than 500m, which met the SLO at 4: only the levels above 4 are open.
    assert middle.floor == 4 and middle.next_level({}) == 16
    middle.on_done({16: True}, [])  # met at the top level: the winner

    last = next(steps)
    assert last.configuration.parameters["cpu"] == "2" and not last.run
    assert "cannot win" in last.reason and "cpu=1" in last.reason


def test_grid_measures_every_level_in_order() -> None:
    (step,) = order_for_search(spec(), configurations(spec(sweep={"concurrency": [4, 1]}), BASE), lambda c: 0)
    assert step.next_level({}) == 1 and step.next_level({1: False}) == 4 and step.next_level({1: True, 4: True}) is None


def test_dominance() -> None:
    # (cpu, batch size): (1, 1), (1, 8), (2, 1), (2, 8)
    one_small, one_big, two_small, _ = configurations(spec(sweep={"cpu": ["1", "2"], "batchSize": [1, 8]}), BASE)
    assert dominates(two_small, one_small) and not dominates(one_small, two_small)
    assert not dominates(two_small, one_big)  # more CPU, but a different batch size


def test_grid_runs_everything_in_order() -> None:
    planned = configurations(spec(sweep={"cpu": ["2", "1"]}), BASE)
    assert [s.configuration.index for s in order_for_search(spec(), planned, lambda c: 0)] == [0, 1]


def test_optuna_proposes_each_pair_once_within_the_budget_and_learns_the_cost() -> None:

    from kaliper.report.schema import TrialReport
    from tests.support.reports import make_stage

    s = spec(
        sweep={"cpu": ["250m", "500m", "1", "2"], "concurrency": [1, 4, 16]},
        search={"strategy": "optuna", "maxTrials": 6, "seed": 3},
    )
    planned = configurations(s, BASE)
    proposed = []
    for step in order_for_search(s, planned, cores_of):
        level = step.next_level({})
        assert step.levels == [level] and step.next_level({level: True}) is None
        proposed.append((step.configuration.index, level))
        # A made-up cost: cheapest at cpu=500m, concurrency=16.
        cost = abs(cores_of(step.configuration) - 0.5) + abs(level - 16) / 16 + 0.1
        stage = make_stage(level=level, requests=1, measured_s=1)
        trial = TrialReport(
            index=0, name="t", parameters={}, status="Succeeded", stage=stage, cost_per_million_requests=cost
        )
        step.on_done({level: True}, [Outcome.of(trial)])
    assert len(proposed) == 6 and len(set(proposed)) == 6


def test_engine_args_add_each_sets_flags_after_the_runtimes_own_and_are_checked_by_the_runtime() -> None:
    llama = ModelDeploymentSpec.model_validate(
        {"model": {"file": "m.gguf"}, "runtime": {"type": "llamacpp", "args": ["--no-warmup"]}}
    )
    q8 = {"name": "kv-q8", "args": ["--cache-type-k", "q8_0", "-fa", "on"]}
    run = spec(sweep={"engineArgs": [{"name": "defaults", "args": []}, q8]})
    defaults, quantized = configurations(run, llama)
    assert (defaults.parameters, quantized.parameters) == ({"engine_args": "defaults"}, {"engine_args": "kv-q8"})
    assert defaults.deployment.runtime.args == ["--no-warmup"]
    assert quantized.deployment.runtime.args == ["--no-warmup", "--cache-type-k", "q8_0", "-fa", "on"]
    assert sweep_problem(run, [defaults, quantized]) is None
    owned = spec(sweep={"engineArgs": [{"name": "big", "args": ["--ctx-size=8192"]}]})
    assert sweep_problem(owned, configurations(owned, llama)) == (
        "configuration engine_args=big: runtime.args: --ctx-size is set by Kaliper from llm.contextSize; set (or "
        "sweep) that instead"
    )
    # A runtime whose flags Kaliper does not list passes them on as written.
    custom = ModelDeploymentSpec.model_validate(
        {"model": {"file": "m.onnx"}, "runtime": {"type": "custom", "command": ["serve"], "port": 9000}}
    )
    anything = spec(sweep={"engineArgs": [{"name": "x", "args": ["--whatever", "-1"]}]})
    assert sweep_problem(anything, configurations(anything, custom)) is None
