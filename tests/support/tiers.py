"""How `make test` spreads the suite over three pytest-xdist workers, which tests it runs alone afterwards, and
how long one test may take.

Half of the suite's time is waiting (the kind tier for its cluster and cAdvisor's scrapes, the control-plane tier
for the operator's steps and minute-scheduled Cleanups), so the tiers that wait run beside the tiers that
compute: each waiting tier is one group that a single worker runs whole (it makes its cluster or control plane
once), every other module is a group of its own (its module fixtures start once), and the kind tier is queued
first because it is the longest. tests/conftest.py hands these groups to pytest-xdist's scheduler (xdist's own
xdist_group marks no longer take effect under pytest 9.2, whose node ids cannot be rewritten). Tests that
measure a CPU quota or compare latencies with a server's own records are marked `quiet` and run after the
parallel phase, with nothing beside them that they did not start.
"""

from __future__ import annotations

# Path prefix -> group. One kind cluster per machine (a fixed network; it saves and restores host settings such
# as ip_forward and iptables, which two at once would restore out of order).
WAITING_TIERS = {"tests/kind/": "kind", "tests/cluster/": "cluster"}
# Runs first in the kind tier: the tutorial's own steps, before any other test changes the chart's settings.
WALKTHROUGH = "tests/kind/test_walkthrough.py"

# Modules (or single tests, "module::test") whose figures a neighbour's load would move, and why.
QUIET = {
    "tests/local/test_optimization_run.py::"
    "test_a_scikit_learn_model_is_converted_quantized_and_tuned_under_the_cpu_limit": (
        "needs a candidate faster than the original beyond the noise of latencies measured under a one-CPU quota, "
        "which a neighbour's load widens"
    ),
    "tests/local/test_cgroups.py": "measures what a CPU quota lets a busy loop use",
    "tests/test_settle.py::test_a_busy_process_beside_the_sample_is_measured_and_named": (
        "expects a busy loop to get most of a core and to be the busiest process, which neighbours' load would not "
        "leave it"
    ),
    "tests/local/test_cpu_limits_run.py": "compares the throughput a quarter core and a whole core buy (seen beside a "
    "cold build: 1,212 against 1,005 requests per second, not the 1.5 times the quotas give)",
    "tests/loadgen/test_end_to_end.py": "compares latencies and schedules with a ground-truth server's own records",
    "tests/loadgen/test_grpc_end_to_end.py": "compares gRPC latencies with a ground-truth server's own records",
    "tests/local/test_tutorial_one_machine.py::test_the_tutorial_runs_as_written": (
        "the tutorial's last step recommends the configuration that met the demo's SLO (p99 within 25 ms), which "
        "its 500m and 1-CPU trials meet alone; beside two busy workers every trial read 33-80 ms (seen in the "
        "parallel phase) and there was nothing to recommend"
    ),
    "tests/local/test_compare_runs.py": "compares two runs' latencies, whose intervals are a few percent wide, "
    "and a neighbour's load in one run and not the other would move them apart",
    "tests/llm/test_reasoning_truth.py": "compares reasoning streams' latencies with a ground-truth server's records",
    "tests/llm/test_stage_end.py": "judges a 48-user stream's time to first token against a server's 60 ms, which "
    "the load generator reads late when it shares the CPUs (seen in the parallel phase: ttft p90 252 ms, p99 343 ms "
    "where alone it reads 99 and 134 ms)",
    "tests/llm/test_trace_replay.py": "compares a replayed trace's schedule and time to first token with a "
    "ground-truth server's records",
    "tests/llm/test_vllm_server.py": "reads a real vLLM's running and waiting gauges at the window edges beside its "
    "counters: beside the kind tier creating its cluster the load generator kept one request running, not two",
    "tests/llm/test_follow_up_profile.py": (
        "judges two llama-server replicas at 600m against an ITL p99 of 50 ms, which alone read 3 ms; beside the "
        "parallel phase, sharing Kaliper's cgroup with the other tests' servers, they read 78.53 ms (95% CI "
        "67.65-113.98 ms) and the trial missed"
    ),
    "tests/llm/test_vllm_runtime.py": "chooses between two vLLM configurations on one pinned CPU by their throughput, "
    "which a neighbour's load on that CPU evens out (seen: 58 and 56 answers, the choice Inconclusive)",
}

# Tests inside a quiet module that run in the parallel phase: they judge a fault's message, a refusal or a hang
# guard, nothing a neighbour's load could move, or a latency with a margin several times what a busy neighbour adds
# (about four minutes of tests on this host).
NOT_QUIET = (
    {
        f"tests/loadgen/test_end_to_end.py::{name}"
        for name in (
            "test_timeouts_are_errors_with_their_time_to_failure",
            "test_unreachable_target_fails_fast_with_a_clear_error",
            "test_a_first_request_answered_with_an_error_leads_the_warnings",
            "test_bad_input_is_refused_before_anything_starts",
            "test_results_document_is_versioned_json",
            "test_a_target_that_goes_down_mid_run_ends_it_early",
            "test_master_without_workers_gives_up_with_a_reason",
            "test_requests_in_flight_when_measuring_ends_are_awaited_and_recorded",
            "test_requests_still_in_flight_after_the_graceful_stop_are_counted",
            "test_requests_resent_after_the_server_closed_the_connection_are_in_the_summary",
            "test_the_master_sends_no_stage_before_each_worker_says_it_is_ready",
            # Counts: the server's own count of a stage's requests against the generator's (within a request per
            # user), two processes' halves of a 120-a-second schedule (within 20 of 360); passed beside two busy
            # loops, three runs each.
            "test_closed_loop_with_two_levels",
            "test_several_processes_merge_into_one_result",
        )
    }
    | {
        f"tests/llm/test_trace_replay.py::{name}"
        for name in (
            "test_a_replay_whose_server_holds_every_request_ends_a_timeout_after_its_last_send",
            "test_a_failed_turn_ends_its_conversation_and_counts_as_failed",
        )
    }
    | {
        f"tests/loadgen/test_grpc_end_to_end.py::{name}"
        for name in (
            "test_a_grpc_client_process_that_dies_ends_the_run_with_the_reason",
            "test_a_grpc_client_process_that_dies_before_it_is_ready_is_reported_at_once_with_its_exit_code",
            "test_calls_that_would_all_be_refused_stop_the_run_with_the_servers_reason",
            "test_a_port_that_does_not_speak_grpc_is_named_as_such",
            "test_a_grpc_target_that_goes_away_mid_run_ends_it_early",
            "test_a_server_that_answers_unavailable_itself_is_up_and_measured",
            "test_a_server_that_refuses_one_call_in_four_is_measured_at_its_pace",
            # Counts and reasons: every call the generator recorded was one the server counted, the server's own
            # words on a refusal, a token that reached it; the throughput they ask for (over 50 or 100 calls in
            # 3 s) is a tenth of what a busy machine still gives.
            "test_the_builtin_server_answers_every_call_and_counts_it",
            "test_tls_and_metadata_from_the_environment_reach_the_server",
            "test_mlserver_answers_every_call_and_counts_it",
            "test_a_shape_mlserver_cannot_take_is_measured_with_its_reason",
            "test_a_model_mlserver_does_not_serve_stops_the_run",
        )
    }
    | {
        # Judged with wide margins: time to first token within 3 s of a server's 200 ms, and between 90 and 500 ms
        # of its 100 ms with no answer ending before the graceful stop does (each takes over 7 s).
        f"tests/llm/test_stage_end.py::{name}"
        for name in (
            "test_24_users_streaming_9s_answers_read_met_in_a_20s_stage",
            "test_a_request_still_in_flight_after_the_graceful_stop_keeps_the_figures_it_reached",
        )
    }
    | {
        "tests/llm/test_vllm_runtime.py::test_its_own_failures_are_named_in_the_trials_reason",
        "tests/llm/test_vllm_runtime.py::test_the_tutorials_vllm_step_is_make_demo_vllm",
        "tests/llm/test_vllm_server.py::test_a_pods_command_line_is_one_the_real_vllm_parses_to_the_settings_asked",
        "tests/llm/test_vllm_server.py::test_the_flags_kaliper_knows_are_the_pinned_vllms_own",
    }
)

# Modules that run llama.cpp's programs through Kaliper's own code (which only looks for them), so the build
# (hack/llama/build.sh, about 5 minutes cold, one at a time) runs before their module fixtures. Tests that start
# a llama-server themselves (tests/support/llama.py) and the image build ask for it on their own. Built when
# first needed, not before pytest, so on a cold machine the other worker's tests run meanwhile.
NEEDS_LLAMA_CPP = {
    "tests/runtimes/test_llamacpp.py",
    "tests/test_llm_serving.py",
    "tests/llm/test_llamacpp_runtime.py",
    "tests/llm/test_gguf_pipeline.py",
    "tests/llm/test_tutorial_llm.py",
    "tests/llm/test_engine_args.py",
    "tests/llm/test_fit_estimate.py",
    "tests/llm/test_quality_run.py",
    "tests/llm/test_follow_up_profile.py",
}

# Seconds a test's own body may take (fixtures' set-up and teardown not counted) unless it is listed below.
CEILING_S = 150.0

# Test id (module path and test name, parameters left off) -> (its ceiling, why it needs that long).
LONG_TESTS: dict[str, tuple[float, str]] = {
    "tests/kind/test_llm_pipeline.py::"
    "test_the_follow_up_profile_reads_both_replicas_load_from_prometheus_and_decides_as_kaliper_run": (
        300.0,
        "a GGUF quantization Job, then two llama-server replicas profiled at two CPU limits (12-30 s each: "
        "measured on while the SLO is undecided), each trial's server load read from Prometheus's 5 s scrapes of "
        "both replicas: 67 s in a clean-clone run, up to about 180 s on a busy machine (110-230 s with the local "
        "half, now tests/llm/test_follow_up_profile.py, which took 40-50 s of it)",
    ),
    "tests/local/test_tutorial_optimize.py::test_the_tutorial_runs_as_written": (
        480.0,
        "the optimization tutorial as a user runs it: the iris pipeline (three candidates, then four follow-up "
        "trials: 58 s alone here) and examples/local/transformer.yaml (eight candidates measured on tokenized text "
        "under the CPU limit, then a follow-up load test until its p99 is stable: 57 s alone here; longer beside a "
        "busy worker on a host without AVX-512, whose int8 and fused kernels are slower)",
    ),
    "tests/test_other_cpu.py::test_the_optimizer_tests_pass_on_an_avx2_cpu": (
        200.0,
        "107 optimizer tests under qemu-user's emulated Haswell, CPU-bound: 55 s alone on a host without "
        "AVX-512, 101 s there beside the other worker (134-151 s before the probe and the tests shared one "
        "interpreter)",
    ),
    "tests/outage/test_api_server_outage.py::test_the_api_server_and_etcd_stopped_for_a_minute_under_sixty_runs": (
        300.0,
        "60 runs created and stepped on a control plane of its own, its API server stopped for 60 s in their "
        "middle and every run then finished",
    ),
    "tests/outage/test_api_server_outage.py::test_an_api_server_that_stops_answering_is_waited_for": (
        300.0,
        "ten runs of two trials, the API server frozen for 45 s in their middle, then every run finished: the "
        "operator probes /readyz with backoff up to 30 s before it carries on (113-178 s in clean-clone runs here)",
    ),
    "tests/local/test_tutorial_one_machine.py::test_the_tutorial_runs_as_written": (
        240.0,
        "the demo as the tutorial runs it: six trials of 2 s warm-up and 6-10 s of load under three CPU quotas, and "
        "up to 30 s of tie-break on a quiet machine: 79 s alone here",
    ),
    "tests/llm/test_tutorial_llm.py::test_the_llama_cpp_steps_run_as_written": (
        330.0,
        "the LLM tutorial's llama.cpp steps as a user runs them: three load-test stages of up to 30 s, three "
        "ProfileRun trials of up to 20 s, a 15 s trace replayed: 201 s alone here",
    ),
    "tests/kind/test_autoscaling.py::test_an_autoscaler_is_rehearsed_and_the_setting_with_a_warm_spare_is_chosen": (
        420.0,
        "two trials of 85 s of load each, after servers that take 15 s to start; metrics-server reads the kubelets "
        "every 15 s and the HPA controller decides every 15 s, so a scale-up is seen 30-60 s into the load",
    ),
    "tests/kind/test_optimization.py::test_the_pipeline_example_runs_end_to_end": (
        240.0,
        "examples/pipeline.yaml whole: an optimization Job, then its ModelDeployment and a four-trial ProfileRun "
        "on the kind cluster",
    ),
}


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def group_of(nodeid: str) -> str:
    """The group a test runs in: its waiting tier, or else its own module."""
    for prefix, group in WAITING_TIERS.items():
        if nodeid.startswith(prefix):
            return group
    return module_of(nodeid)


# The longest of the other groups, queued after the two tiers, longest first (minutes of wall time in a warm
# clean-clone run here, beside the tiers): the short modules are left for the end, so the workers run out of
# tests within a short module of each other. In the order of collection one of them ran on for 1.5-2 minutes
# after another had nothing left.
LONGEST_FIRST = (
    "tests/outage/test_api_server_outage.py",  # 6.2
    "tests/local/test_tutorial_optimize.py",  # 5.4
    "tests/local/test_kaliper_run.py",  # 4.0
    "tests/llm/test_tutorial_llm.py",  # 3.7
    "tests/llm/test_broken_servers.py",  # 2.6
    "tests/test_other_cpu.py",  # 1.8
    "tests/llm/test_workload_from_prometheus.py",  # 1.7
    "tests/loadgen/test_end_to_end.py",  # 1.7 (its tests outside the quiet phase)
    "tests/local/test_optimization_run.py",  # 1.5
    "tests/test_pytorch_conversion.py",  # 1.2
)


def queue_position(nodeid: str) -> float:
    """The kind tier first (the longest group; the tutorial's walkthrough first inside it), the control-plane tier
    second, then LONGEST_FIRST in its order, the rest after.

    pytest-xdist gives a worker its next group only when it is almost out of tests, so the kind tier keeps one
    worker for its whole length and the others work through the queue. Queued last, the control-plane tier
    (about 10 minutes, one group) ran alone at the end after the other workers had done every other module.
    Queued second, the modules after it fill the other workers at the end."""
    if nodeid.startswith(WALKTHROUGH):
        return 0
    group = group_of(nodeid)
    if group in LONGEST_FIRST:
        return 1.5 + LONGEST_FIRST.index(group) / 100
    return {"kind": 0.5, "cluster": 1}.get(group, 2)


def holds_quiet_tests(module: str) -> bool:
    """Whether a test module (its path from the repository's root) has a test that is_quiet can mark."""
    return any(module_of(key) == module for key in QUIET)


def left_uncollected(path: str, markexpr: str) -> bool | None:
    """For pytest_ignore_collect: under `-m quiet` alone (make test's quiet phase) a test module without quiet tests
    is not imported (its tests would all be deselected, after about 8 s of collecting them all); None leaves the
    choice to pytest (directories, other files, other mark expressions). `path` is from the repository's root."""
    name = path.rpartition("/")[2]
    if markexpr != "quiet" or not (name.startswith("test_") and name.endswith(".py")):
        return None
    return not holds_quiet_tests(path)


def is_quiet(nodeid: str) -> bool:
    if plain_id(nodeid) in NOT_QUIET:
        return False
    return module_of(nodeid) in QUIET or plain_id(nodeid) in QUIET


def plain_id(nodeid: str) -> str:
    """A report's node id without its parameters."""
    return nodeid.split("[", 1)[0]


def over_ceiling(durations: dict[str, float]) -> list[str]:
    """The tests that took longer than their ceiling, each as a line saying by how much."""
    lines = []
    for nodeid, seconds in sorted(durations.items()):
        ceiling, _ = LONG_TESTS.get(plain_id(nodeid), (CEILING_S, ""))
        if seconds > ceiling:
            lines.append(f"{plain_id(nodeid)}: {seconds:.0f} s, over its ceiling of {ceiling:.0f} s")
    return lines
