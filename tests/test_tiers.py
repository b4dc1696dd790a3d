"""How make test spreads the suite (tests/support/tiers.py): groups, quiet tests and time ceilings."""

from __future__ import annotations

import ast
import subprocess
import sys
import time

from tests.support.builds import ceilings_enforced, run_build, waited_s
from tests.support.cpu_use import SESSION_END, busiest_lines, by_module, cpu_seconds, machine_busy_seconds, wall_lines
from tests.support.paths import REPO
from tests.support.tiers import (
    LONG_TESTS,
    LONGEST_FIRST,
    NEEDS_LLAMA_CPP,
    NOT_QUIET,
    QUIET,
    group_of,
    holds_quiet_tests,
    is_quiet,
    left_uncollected,
    module_of,
    over_ceiling,
    queue_position,
)


def test_each_waiting_tier_is_one_group_and_every_other_module_its_own() -> None:
    assert group_of("tests/kind/test_trials.py::test_a") == group_of("tests/kind/test_pods.py::test_b") == "kind"
    assert group_of("tests/kind/test_walkthrough.py::test_c") == "kind"
    assert group_of("tests/cluster/test_gc.py::test_c[x]") == "cluster"
    assert group_of("tests/loadgen/test_sse.py::test_d") == "tests/loadgen/test_sse.py"
    ids = ("kind/test_walkthrough.py", "kind/test_trials.py", "cluster/test_x.py", "loadgen/test_x.py")
    assert [queue_position(f"tests/{i}::t") for i in ids] == [0, 0.5, 1, 2]
    longest = ("outage/test_api_server_outage.py", "local/test_tutorial_optimize.py", "test_pytorch_conversion.py")
    assert [queue_position(f"tests/{i}::t") for i in longest] == [1.5, 1.51, 1.59]


def test_the_longest_modules_queued_first_exist() -> None:
    assert [m for m in LONGEST_FIRST if not (REPO / m).is_file()] == []


def test_quiet_modules_are_named_with_why() -> None:
    assert is_quiet("tests/local/test_cgroups.py::test_cpu_limit_is_enforced_and_accounted")
    assert not is_quiet("tests/local/test_kaliper_run.py::test_report_json_is_versioned")
    sklearn = (
        "tests/local/test_optimization_run.py::"
        "test_a_scikit_learn_model_is_converted_quantized_and_tuned_under_the_cpu_limit"
    )
    assert is_quiet(sklearn)
    assert not is_quiet(
        "tests/local/test_optimization_run.py::test_the_transformer_example_fuses_tokenizes_and_measures_under_the_cpu_limit"
    )
    assert all(reason for reason in QUIET.values())
    # A quiet module's test of a fault's message runs beside the rest, with its parameters.
    assert not is_quiet("tests/loadgen/test_grpc_end_to_end.py::test_a_port_that_does_not_speak_grpc_is_named_as_such")
    assert not is_quiet(
        "tests/loadgen/test_grpc_end_to_end.py::test_a_grpc_client_process_that_dies_ends_the_run_with_the_reason[2]"
    )
    assert is_quiet("tests/loadgen/test_grpc_end_to_end.py::test_closed_loop_calls_agree_with_the_servers_own_records")


def test_the_quiet_phase_collects_only_the_modules_holding_quiet_tests() -> None:
    assert holds_quiet_tests("tests/local/test_cgroups.py")  # a whole module
    assert holds_quiet_tests("tests/test_settle.py")  # one test of it
    assert not holds_quiet_tests("tests/local/test_kaliper_run.py")
    assert left_uncollected("tests/local/test_kaliper_run.py", "quiet") is True
    assert left_uncollected("tests/local/test_cgroups.py", "quiet") is False
    assert left_uncollected("tests/local", "quiet") is None  # directories are walked
    assert left_uncollected("tests/local/conftest.py", "quiet") is None
    assert left_uncollected("tests/local/test_kaliper_run.py", "not quiet") is None
    assert left_uncollected("tests/local/test_kaliper_run.py", "") is None


def test_a_test_over_its_ceiling_is_named_unless_it_says_why() -> None:
    pipeline = "tests/kind/test_optimization.py::test_the_pipeline_example_runs_end_to_end"
    assert over_ceiling({"tests/test_units.py::test_a[1]": 151.0, "tests/test_units.py::test_b": 149.0}) == [
        "tests/test_units.py::test_a: 151 s, over its ceiling of 150 s"
    ]
    assert over_ceiling({pipeline: 230.0}) == []
    assert over_ceiling({pipeline: 241.0}) == [f"{pipeline}: 241 s, over its ceiling of 240 s"]


def test_a_build_waited_for_is_timed_and_minutes_of_builds_lift_the_ceilings() -> None:
    before = waited_s()
    run_build(["sleep", "0.2"], check=True)
    assert waited_s() - before >= 0.2
    assert ceilings_enforced(60.0)  # a warm run that rebuilt the image's last layers
    assert not ceilings_enforced(300.0)  # a cold cache: its builds shared the cores with the tests


def test_every_long_test_quiet_module_and_llama_cpp_module_exists() -> None:
    """A renamed test must not keep a ceiling it no longer needs (or lose one silently)."""
    for test_id in [*LONG_TESTS, *(key for key in QUIET if "::" in key), *NOT_QUIET]:
        path, name = test_id.split("::")
        functions = {n.name for n in ast.walk(ast.parse((REPO / path).read_text())) if isinstance(n, ast.FunctionDef)}
        assert name in functions, test_id
    assert all((REPO / module_of(key)).exists() for key in QUIET)
    # Each quiet entry gives its reason, and only that: a ceiling written there (a tuple) would make a test quiet.
    assert [key for key, reason in QUIET.items() if not isinstance(reason, str)] == []
    assert all(module_of(key) in QUIET for key in NOT_QUIET)  # an exception inside a quiet module, not a stray
    assert all((REPO / module).exists() for module in NEEDS_LLAMA_CPP)


def test_cpu_use_is_summed_by_module_and_the_busiest_listed_first() -> None:
    samples = [("tests/a.py", 30.0), ("tests/b.py", 90.0), ("tests/a.py", 60.0), (SESSION_END, 60.0)]
    summed = by_module(samples)
    assert summed == {"tests/a.py": 90.0, "tests/b.py": 90.0, SESSION_END: 60.0}
    assert busiest_lines(summed, wall_s=240.0, top=2) == [
        "4.0 CPU minutes in all, 1.00 cores busy on average over 4.0 min",
        "   1.5 min  37.5%  tests/a.py",
        "   1.5 min  37.5%  tests/b.py",
    ]
    assert busiest_lines({}, wall_s=10.0) == []


def test_wall_time_is_listed_per_worker_then_by_group_longest_first() -> None:
    groups = {"node": 1380.0, "cluster": 600.0, "tests/a.py": 30.0}
    assert wall_lines(groups, {"gw1": 1500.0, "gw0": 1410.0}, top=2) == [
        "busy per worker: gw0 23.5 min, gw1 25.0 min",
        "  23.0 min  node",
        "  10.0 min  cluster",
    ]


def test_the_machines_busy_time_grows_with_a_process_burning_cpu() -> None:
    before = machine_busy_seconds()
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass
    assert machine_busy_seconds() - before >= 0.25  # clock ticks: 10 ms apiece


def test_a_child_process_cpu_is_counted_once_it_is_waited_for() -> None:
    before = cpu_seconds()
    # A child that burns about 0.3 s of CPU; its time counts in the parent's once the parent has waited for it.
    subprocess.run(
        [sys.executable, "-c", "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"],
        check=True,
    )
    assert cpu_seconds() - before >= 0.3
