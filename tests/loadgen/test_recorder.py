from __future__ import annotations

import time

from kaliper.loadgen.recorder import Aggregator, Recorder, Window
from kaliper.loadgen.results import late_reason
from kaliper.report.schema import GeneratorUsage


def test_requests_land_in_the_window_they_completed_in() -> None:
    recorder = Recorder(window_s=1.0, open_loop=False)
    recorder.begin_stage(0, start_wall=100.0)
    recorder.record(100.2, 0.010)
    recorder.record(100.9, 0.020, error="HTTP 503")
    recorder.record(101.1, 0.030)
    recorder.record(99.5, 0.040)  # before the stage began: a straggler of the previous one
    windows, until = recorder.take_closed(now_wall=101.5)
    assert until == 0
    assert [(w.index, w.requests, dict(w.errors)) for w in windows] == [(0, 2, {"HTTP 503": 1})]
    windows, until = recorder.take_closed(now_wall=102.0)
    assert until == 1 and [w.requests for w in windows] == [1]


def test_open_loop_records_corrected_latency_and_late_sends() -> None:
    recorder = Recorder(window_s=1.0, open_loop=True)
    recorder.begin_stage(2, start_wall=0.0)
    recorder.record(0.5, service_s=0.010, corrected_s=0.300, late_no_connection=True)
    recorder.record(0.6, service_s=0.010, corrected_s=0.011, late_generator=True)
    recorder.record(0.7, service_s=0.010, corrected_s=0.010)
    (window,), _ = recorder.take_closed(1.0)
    assert window.stage == 2
    assert window.corrected is not None and window.corrected.max > 0.29
    assert window.service.max < 0.011
    assert (window.late_no_connection, window.late_generator) == (1, 1)


def test_wire_round_trip_and_merge() -> None:
    a, b = Window(0, 3), Window(0, 3)
    a.failed.record(0.01)
    a.requests, a.errors["timeout"] = 1, 1
    b.service.record(0.02)
    b.requests = 1
    merged = Window.from_wire(a.to_wire()).merge(Window.from_wire(b.to_wire()))
    assert merged.requests == 2 and merged.errors == {"timeout": 1}
    assert (merged.service.count, merged.failed.count) == (1, 1)


def test_a_window_is_complete_only_when_every_source_closed_it() -> None:
    aggregator = Aggregator(sources=2)
    w = Window(0, 0)
    w.requests = 5
    aggregator.add("worker-a", 0, [w], closed_until=1)
    assert aggregator.complete_until(0) == -1  # worker-b has said nothing yet
    aggregator.add("worker-b", 0, [], closed_until=0)
    assert aggregator.complete_until(0) == 0
    aggregator.add("worker-b", 0, [], closed_until=1)
    assert aggregator.complete_until(0) == 1
    assert [x.requests for x in aggregator.stage_windows(0, 1)] == [5, 0]


def test_a_scheduled_send_is_late_by_the_connections_or_by_the_generator() -> None:
    recorder = Recorder(window_s=3600.0, open_loop=True)
    recorder.begin_stage(0, start_wall=time.time())  # each completes now, on the wall clock
    # (due, claimed, sent, answered) on the perf_counter clock, in seconds
    recorder.record_send(10.0, 9.0, 10.001, 10.011, None, 5, 7)  # on time: 1 ms after it was due
    recorder.record_send(10.0, 10.005, 10.006, 10.016, None, 5, 7)  # claimed late: no connection free
    recorder.record_send(10.0, 9.0, 10.005, 10.015, "HTTP 503", 5, 0)  # claimed in time, sent late
    (window,), _ = recorder.take_closed(time.time() + 3600)
    assert (window.requests, window.late_no_connection, window.late_generator) == (3, 1, 1)
    assert dict(window.errors) == {"HTTP 503": 1}
    assert (window.bytes_sent, window.bytes_received) == (15, 14)
    # Latency of the answered two from when each was due (11 and 16 ms), service time from when each left
    # (10 ms each); the failure is no answer: its 10 ms are time to failure, in no latency figure.
    assert window.corrected is not None and (window.corrected.count, window.service.count) == (2, 2)
    assert round(window.corrected.max * 1000) == 16 and round(window.service.max * 1000) == 10
    assert window.failed.count == 1 and round(window.failed.max * 1000) == 10


def test_requests_unanswered_at_a_windows_end_are_counted_in_flight() -> None:
    recorder = Recorder(window_s=1.0, open_loop=False)
    start = time.time() - 2.5  # windows 0 and 1 have ended, and no request was answered in either
    recorder.begin_stage(0, start)
    early, late, done = object(), object(), object()
    recorder.sending(early, at_wall=start + 0.25)
    recorder.sending(late, at_wall=start + 1.5)
    recorder.sending(done, at_wall=start + 0.5)
    recorder.answered(done)
    windows, until = recorder.take_closed(time.time())
    assert until == 1
    assert [(w.index, w.requests, w.in_flight, round(w.in_flight_oldest_s, 6)) for w in windows] == [
        (0, 0, 1, 0.75),
        (1, 0, 2, 1.75),
    ]
    merged = Window.from_wire(windows[1].to_wire()).merge(Window.from_wire(windows[0].to_wire()))
    assert (merged.in_flight, round(merged.in_flight_oldest_s, 6)) == (3, 1.75)


def test_late_sends_are_blamed_on_the_connections_the_generators_cpu_or_the_machine() -> None:
    busy = GeneratorUsage(cpu_cores=0.95, capacity_cores=1.0)
    idle = GeneratorUsage(cpu_cores=0.21, capacity_cores=2.0)
    assert late_reason(0.034, 30, 4, idle, "openLoop") == (
        "3.4% of sends left more than 2 ms late: every connection was busy; raise load.openLoop.maxConnections"
    )
    assert late_reason(0.034, 0, 34, busy, "trace") == (
        "3.4% of sends left more than 2 ms late: the load generator could not keep up; add load.processes or "
        "load.workers"
    )
    # A connection was free and the generator had CPU to spare: the sends waited for the machine to wake it.
    assert late_reason(0.034, 0, 34, idle, "openLoop") == (
        "3.4% of sends left more than 2 ms late: a connection was free and the load generator used 0.21 of the 2 "
        "cores it can use, so they waited for the machine to wake it (other work beside the run, or the host's "
        "timers), not for CPU: more processes will not help"
    )
    # Without its CPU figure, the advice is the generator's.
    assert late_reason(0.034, 0, 34, None, "openLoop").endswith("add load.processes or load.workers")
