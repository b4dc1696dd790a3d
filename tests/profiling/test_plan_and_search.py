from __future__ import annotations

from kaliper.api.modeldeployment import ModelDeploymentSpec
from kaliper.api.profilerun import ProfileRunSpec
from kaliper.profiling.plan import configurations
from kaliper.profiling.search import order_for_search
from kaliper.report.schema import TrialReport

BASE = ModelDeploymentSpec.model_validate({"model": {"file": "m.onnx"}, "resources": {"requests": {"memory": "1Gi"}}})


def spec(**extra: object) -> ProfileRunSpec:
    return ProfileRunSpec.model_validate(
        {
            "target": {"deploymentRef": {"name": "m"}},
            "payload": {"inline": "{}"},
            "load": {"closedLoop": {"concurrency": 2}},
            **extra,
        }
    )


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


def trial(index: int, met: bool) -> TrialReport:
    return TrialReport(index=index, name=f"t{index}", parameters={}, status="Succeeded", slo_met=met)


def test_knee_search_runs_cheapest_first_and_skips_what_cannot_win() -> None:
    s = spec(sweep={"cpu": ["2", "500m", "1"], "concurrency": [1, 4]}, search={"strategy": "knee"})
    planned = configurations(s, BASE)
    cores = {
        c.index: float(c.parameters["cpu"].rstrip("m")) / (1000 if "m" in c.parameters["cpu"] else 1) for c in planned
    }
    steps = order_for_search(s, planned, lambda c: cores[c.index])
    first = next(steps)
    assert first.configuration.parameters["cpu"] == "500m" and first.run
    first.feedback([trial(2, False)])  # missed at the first level: no winner yet
    second = next(steps)
    assert second.configuration.parameters["cpu"] == "1" and second.run
    second.feedback([trial(4, True), trial(5, True)])  # met at every level: the winner
    third = next(steps)
    assert third.configuration.parameters["cpu"] == "2" and not third.run
    assert "cannot win" in third.reason and "cpu=1" in third.reason


def test_grid_runs_everything_in_order() -> None:
    planned = configurations(spec(sweep={"cpu": ["2", "1"]}), BASE)
    assert [s.configuration.index for s in order_for_search(spec(), planned, lambda c: 0)] == [0, 1]
