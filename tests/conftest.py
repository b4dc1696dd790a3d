"""Shared fixtures, and how the suite is spread over its workers and timed (tests/support/tiers.py). The
control plane of tests/cluster is that package's own (tests/cluster/conftest.py)."""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

from tests.support.builds import BUILD_PROPERTY, ceilings_enforced, waited_s
from tests.support.cpu_use import (
    CPU_PROPERTY,
    SESSION_END,
    busiest_lines,
    by_module,
    cpu_seconds,
    machine_busy_seconds,
    wall_lines,
)
from tests.support.llama import llama_server_binary
from tests.support.settle import wait_until_quiet
from tests.support.tiers import (
    NEEDS_LLAMA_CPP,
    group_of,
    is_quiet,
    left_uncollected,
    module_of,
    over_ceiling,
    queue_position,
)

# The operator steps each ProfileRun every second in tests (5 s by default), read when its module is imported.
os.environ.setdefault("KALIPER_STEP_INTERVAL", "1")
# Finished runs' ttls are checked every 2 s in tests (30 s by default).
os.environ.setdefault("KALIPER_EXPIRY_INTERVAL", "2")
# The operator's own namespace, as the chart sets it from its pod: only Cleanups there reach other namespaces.
os.environ.setdefault("KALIPER_NAMESPACE", "kaliper-system")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The quiet phase imports only the modules holding quiet tests (tests/support/tiers.py)."""
    if not collection_path.is_relative_to(config.rootpath):
        return None
    return left_uncollected(collection_path.relative_to(config.rootpath).as_posix(), config.getoption("markexpr"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each test's quiet mark (tests/support/tiers.py), and the kind tier queued first."""
    for item in items:
        if is_quiet(item.nodeid):
            item.add_marker(pytest.mark.quiet)
    items.sort(key=lambda item: queue_position(item.nodeid))  # stable: the order inside a group stays


def pytest_collection_finish(session: pytest.Session) -> None:
    """Before tests marked quiet (the quiet phase of make test, or one run by hand): the machine settled."""
    if hasattr(session.config, "workerinput") or not any(item.get_closest_marker("quiet") for item in session.items):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    wait_until_quiet(reporter.write_line if reporter is not None else print)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Under `pytest -n`: each group of tests/support/tiers.py goes whole to one worker, in queue order (with
    --no-loadscope-reorder, as make test runs it; xdist would otherwise hand out the largest groups first)."""
    from xdist.scheduler import LoadScopeScheduling

    class TierScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return TierScheduling(config, log)


@pytest.fixture(scope="module", autouse=True)
def _llama_cpp_built(request: pytest.FixtureRequest) -> None:
    """llama.cpp built before the module fixtures of the modules that run it (NEEDS_LLAMA_CPP)."""
    if request.node.nodeid in NEEDS_LLAMA_CPP:
        llama_server_binary()


_call_seconds: dict[str, float] = {}
_cpu_used: list[tuple[str, float]] = []  # (module, CPU seconds), from every report (tests/support/cpu_use.py)
_last_of_session = pytest.StashKey[bool]()
_cpu_mark = {"seconds": 0.0, "session_start": time.monotonic(), "machine_start": machine_busy_seconds()}
_builds_waited = {"seconds": 0.0}  # by every test phase of the run, all workers (tests/support/builds.py)
_wall_by_group: dict[str, float] = defaultdict(float)  # set-up, call and teardown seconds, by tiers.py's group
_wall_by_worker: dict[str, float] = defaultdict(float)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    item.stash[_last_of_session] = nextitem is None  # its teardown stops the session fixtures too
    _cpu_mark["seconds"], _cpu_mark["built"] = cpu_seconds(), waited_s()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport:
    """Each report carries the CPU its phase used and the seconds it waited for builds (a worker's reports reach
    the controller with them)."""
    report: pytest.TestReport = yield
    now, built = cpu_seconds(), waited_s()
    used, _cpu_mark["seconds"] = now - _cpu_mark["seconds"], now
    report.user_properties.append((BUILD_PROPERTY, built - _cpu_mark["built"]))
    _cpu_mark["built"] = built
    last = call.when == "teardown" and item.stash.get(_last_of_session, False)
    report.user_properties.append((CPU_PROPERTY, (SESSION_END if last else module_of(item.nodeid), used)))
    return report


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    built = sum(value for name, value in report.user_properties if name == BUILD_PROPERTY)
    _builds_waited["seconds"] += built
    if report.when == "call":
        _call_seconds[report.nodeid] = report.duration - built
    _wall_by_group[group_of(report.nodeid)] += report.duration
    _wall_by_worker[getattr(report, "worker_id", None) or "main"] += report.duration
    _cpu_used.extend(tuple(value) for name, value in report.user_properties if name == CPU_PROPERTY)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The modules that used the most CPU; and fail the run, loudly, when a test took longer than its ceiling
    without a stated reason (unless the run waited minutes for builds: tests/support/builds.py)."""
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: its controller sees every report and decides
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    wall_s = time.monotonic() - _cpu_mark["session_start"]
    busiest = busiest_lines(by_module(_cpu_used), wall_s)
    if reporter is not None and busiest:
        reporter.section("CPU by test module (tests/support/cpu_use.py)")
        for line in busiest:
            reporter.line(line)
        machine = (machine_busy_seconds() - _cpu_mark["machine_start"]) / wall_s
        reporter.line(f"the whole machine: {machine:.2f} of {os.cpu_count()} cores busy on average (containers too)")
        reporter.section("wall time by group (tests/support/tiers.py)")
        for line in wall_lines(_wall_by_group, _wall_by_worker):
            reporter.line(line)
    built = _builds_waited["seconds"]
    if reporter is not None and built >= 1:
        reporter.line(f"waited for builds (tests/support/builds.py): {built / 60:.1f} min")
    slow = over_ceiling(_call_seconds)
    if slow:
        cold = not ceilings_enforced(built)
        if reporter is not None:
            reporter.section("tests over their time ceiling (tests/support/tiers.py)", red=not cold)
            for line in slow:
                reporter.line(line, red=not cold)
            if cold:
                reporter.line(
                    f"not failing the run: it waited {built / 60:.1f} min for builds (a cold cache), which ran "
                    "beside the tests on the same cores; the ceilings are for warm runs"
                )
        if not cold:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
