from __future__ import annotations

import time

from kaliper.loadgen.faults import TIMEOUT, Family, Fault, FaultKind, Stream, grpc_status, http_status, transport
from kaliper.loadgen.recorder import Aggregator, Recorder, Window
from kaliper.loadgen.results import error_time_share, first_answers, late_reason
from kaliper.loadgen.tokens import Reached
from kaliper.measure.judgement import Bound
from kaliper.report.schema import GeneratorUsage


def test_requests_land_in_the_window_they_completed_in() -> None:
    recorder = Recorder(window_s=1.0, open_loop=False)
    recorder.begin_stage(0, start_wall=100.0)
    recorder.record(100.2, 0.010)
    recorder.record(100.9, 0.020, fault=Fault(http_status(503)))
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


def test_a_window_counts_the_requests_answered_within_every_latency_bound_from_their_intended_send() -> None:
    bounds = [Bound("latency", 99, 0.100), Bound("latency", 50, 0.250, corrected=False), Bound("ttft", 99, 0.001)]
    recorder = Recorder(window_s=1.0, open_loop=True, bounds=bounds)
    recorder.begin_stage(0, start_wall=0.0)
    recorder.record(0.1, service_s=0.050, corrected_s=0.080)  # within both whole-request bounds
    recorder.record(0.2, service_s=0.050, corrected_s=0.150)  # served fast, but sent 100 ms late: missed
    recorder.record(0.3, service_s=0.090, corrected_s=0.100)  # on the bound: within it
    recorder.record(0.4, service_s=0.010, corrected_s=0.010, fault=Fault(http_status(503)))  # failed: missed
    recorder.record(0.5, service_s=0.010, corrected_s=0.010, good=False)  # its caller judged its tokens
    recorder.record(1.2, service_s=0.300, corrected_s=0.300)
    windows, _ = recorder.take_closed(2.0)
    assert [(w.requests, w.good) for w in windows] == [(5, 2), (1, 0)]
    merged = Window.from_wire(windows[0].to_wire()).merge(Window.from_wire(windows[1].to_wire()))
    assert (merged.requests, merged.good) == (6, 2)


def test_each_server_that_names_itself_is_recorded_at_its_first_answer() -> None:
    recorder = Recorder(window_s=1.0, open_loop=False)
    recorder.begin_stage(0, start_wall=100.0)
    recorder.record(100.40, 0.010, replica="iris-b")
    recorder.record(100.20, 0.010, replica="iris-b")  # ended earlier, recorded later (another user)
    recorder.record(100.30, 0.010, fault=Fault(http_status(503)), replica="iris-c")  # a failure is no answer
    recorder.record(101.70, 0.010, replica="iris-c")
    recorder.record(101.80, 0.010)  # names nobody
    first, second = recorder.take_closed(now_wall=102.0)[0]
    assert (first.first_answers, second.first_answers) == ({"iris-b": 100.2}, {"iris-c": 101.7})
    merged = Window.from_wire(second.to_wire()).merge(Window.from_wire(first.to_wire()))
    assert merged.first_answers == {"iris-c": 101.7, "iris-b": 100.2}
    assert first_answers([first, second], start_wall=100.0) == {"iris-b": 0.2, "iris-c": 1.7}


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
    recorder.begin_stage(0, start_wall=time.time() - 1)  # each completes now, on the wall clock, a second in
    # (due, claimed, sent, answered) on the perf_counter clock, in seconds
    recorder.record_send(10.0, 9.0, 10.001, 10.011, None, 5, 7)  # on time: 1 ms after it was due
    recorder.record_send(10.0, 10.005, 10.006, 10.016, None, 5, 7)  # claimed late: no connection free
    recorder.record_send(10.0, 9.0, 10.005, 10.015, Fault(http_status(503)), 5, 0)  # claimed in time, sent late
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
    start = time.time()
    recorder.begin_stage(0, start)
    early, late, done = object(), object(), object()
    recorder.sending(early, at_wall=start + 0.25)
    recorder.sending(late, at_wall=start + 1.5)
    recorder.sending(done, at_wall=start + 0.5)
    recorder.answered(done)
    windows, until = recorder.take_closed(start + 2.5)  # windows 0 and 1 have ended, no request answered in either
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


def test_the_drain_records_what_was_sent_before_measuring_ended_and_nothing_after() -> None:
    recorder = Recorder(window_s=1.0, open_loop=False)
    recorder.begin_stage(0, start_wall=100.0)
    recorder.record(100.5, 0.2)  # window 0
    recorder.record(101.1, 0.3)  # window 1, sent at 100.8: in flight at its start (the drain's first answer)
    recorder.record(101.2, 0.1)  # window 1, sent at 101.1
    windows, until = recorder.take_closed(now_wall=101.0)
    assert (until, [w.requests for w in windows]) == (0, [1])
    # Measuring ends at 101.0 (window 0's end), decided a little after: the answer at 101.1 was sent before
    # the edge and belongs to the drain; the one sent at 101.1 does not.
    recorder.sending("a", at_wall=100.9)
    recorder.sending("b", at_wall=100.95)
    recorder.sending("c", at_wall=101.05)  # sent after the edge: not awaited
    recorder.begin_drain(101.0)
    assert recorder.holding
    pending, oldest_s = recorder.drain_pending(now_wall=101.5)
    assert (pending, round(oldest_s, 6)) == (2, 0.6)
    recorder.record(101.6, 0.7, fault=Fault(TIMEOUT))  # a's, sent at 100.9
    recorder.answered("a")
    recorder.record(101.7, 0.5)  # c's, sent at 101.2: in no figure
    recorder.answered("c")
    recorder.record_wait(1.0, retry_after=False)  # held: no wait is counted
    assert recorder.take_closed(now_wall=102.5) == ([], 1)  # the drain window is handed out on its own
    drain = recorder.finish_drain(now_wall=103.0)  # b never answered
    assert (drain.index, drain.requests, dict(drain.errors), drain.service.count) == (1, 2, {"timeout": 1}, 1)
    assert (drain.in_flight, round(drain.in_flight_oldest_s, 6), drain.waits) == (1, 2.05, 0)
    recorder.record(103.1, 0.1)  # answered after the drain: in no figure
    assert drain.requests == 2 and recorder.holding
    recorder.begin_stage(1, start_wall=104.0)
    assert not recorder.holding


def test_closed_loop_failing_time_counts_waits_and_half_the_one_an_answer_ended() -> None:
    recorder = Recorder(window_s=1.0, open_loop=False)
    start = time.time()
    recorder.begin_stage(0, start)
    recorder.record(start + 0.05, 0.02)  # an answer: 0.02 s of the user's time, none failing
    recorder.record(start + 0.08, 0.01, fault=Fault(transport(ConnectionRefusedError())))
    recorder.record_wait(1.5, retry_after=False, at_wall=start + 0.1)  # spans windows 0 (0.9 s) and 1 (0.6 s)
    # The next request was answered, and nothing else was sent during the wait: the server came back at some
    # time in it, its middle as the estimate.
    recorder.record_recovered(start + 0.1, 1.5)
    windows, _ = recorder.take_closed(start + 2.0)
    assert [round(w.waited_s, 3) for w in windows] == [0.9, 0.6]
    assert [round(w.failing_s, 3) for w in windows] == [0.76, 0.0]  # failing until 0.85 s
    total = windows[0].merge(windows[1])
    assert (total.waits, round(total.user_s, 3), round(total.failing_s, 3)) == (1, 1.53, 0.76)
    assert error_time_share(total, open_loop=False) == round(0.76 / 1.53, 6)


def test_a_wait_is_failing_until_other_users_requests_show_the_server_back() -> None:
    """Another user's request sent 0.5 s into the wait failed and its next, sent at 0.7 s, was answered: the
    server came back between the two (0.6 s, their middle), not at the wait's middle."""
    recorder = Recorder(window_s=1.0, open_loop=False)
    start = time.time()
    recorder.begin_stage(0, start)
    recorder.record(start + 0.08, 0.01, fault=Fault(transport(ConnectionRefusedError())))
    recorder.record_wait(1.5, retry_after=False, at_wall=start + 0.1)
    recorder.record(start + 0.52, 0.02, fault=Fault(transport(ConnectionRefusedError())))  # sent at 0.5 s
    recorder.record(start + 0.72, 0.02)  # sent at 0.7 s, answered
    recorder.record_recovered(start + 0.1, 1.5)
    windows, _ = recorder.take_closed(start + 2.0)
    # Failing: the two failed requests (0.03 s) and the wait until 0.6 s (0.5 s), all in window 0.
    assert [round(w.failing_s, 3) for w in windows] == [0.53, 0.0]
    assert round(windows[0].merge(windows[1]).user_s, 3) == 1.55


class _Streaming:
    """A sender reading a stream (as GenerationUser is): the figures its request in flight has reached."""

    def __init__(self, reached: Reached | None) -> None:
        self._reached = reached

    def reached(self) -> Reached | None:
        return self._reached


def test_the_drain_records_the_figures_requests_still_in_flight_have_reached() -> None:
    recorder = Recorder(window_s=1.0, open_loop=True, tokens=True)
    recorder.begin_stage(0, start_wall=100.0)
    first, thinking, silent, late = (
        _Streaming(Reached(0.12, 0.13, 0.12, 0.13)),
        _Streaming(Reached(0.2, 0.25, None, None)),  # still thinking: no answer token yet
        _Streaming(None),
        _Streaming(Reached(0.05, 0.05, 0.05, 0.05)),
    )
    for sender, at in ((first, 100.5), (thinking, 100.6), (silent, 100.7), (late, 101.2)):
        recorder.sending(sender, at_wall=at)
    recorder.begin_drain(101.0)
    drain = recorder.finish_drain(now_wall=101.5)  # `late` was sent after the edge: in no figure
    assert (drain.in_flight, dict(drain.reached)) == (3, {"ttft": 2, "ttfot": 1})
    tokens = drain.tokens
    assert tokens is not None and tokens.streams == 0
    assert [round(tokens.ttft_corrected.value_at_rank(r) * 1000) for r in (1, 2)] == [130, 250]
    assert (tokens.ttft.count, tokens.ttfot.count, round(tokens.ttfot.max * 1000)) == (2, 1, 120)


def test_failures_the_target_did_not_answer_are_counted_apart_whatever_their_kind() -> None:
    """Whether a failure was answered is made where it is seen (a Fault), not read back from its kind's text:
    a kind no list names (here a new one) counts as whatever its fault says, and the count survives the wire."""
    recorder = Recorder(window_s=1.0, open_loop=False)
    recorder.begin_stage(0, start_wall=100.0)
    recorder.record(100.1, 0.01, fault=Fault(grpc_status("UNAVAILABLE"), "the server says so"))
    recorder.record(100.2, 0.01, fault=Fault(FaultKind(Family.STREAM, "a kind added later", answered=True)))
    recorder.record(100.3, 0.01, fault=Fault(transport(ConnectionResetError()), "reset by peer"))
    (window,), _ = recorder.take_closed(now_wall=101.5)
    assert (window.requests, sum(window.errors.values()), window.unanswered) == (3, 3, 1)
    assert window.messages == {"gRPC UNAVAILABLE": ["the server says so"], "ConnectionResetError": ["reset by peer"]}
    again = Window.from_wire(window.to_wire())
    assert again.unanswered == 1 and again.merge(window).unanswered == 2


def test_a_faults_words_say_its_kind_once_and_no_colon_before_nothing() -> None:
    assert Fault(Stream.CUT_SHORT.kind).words == "stream cut short"
    assert Fault(Stream.CUT_SHORT.kind, "").words == "stream cut short"
    engine = Fault(Stream.ERROR_EVENT.kind, "error event mid-stream: engine dead")
    assert engine.words == "error event mid-stream: engine dead"
    assert Fault(http_status(503), "busy,\n  try later").words == "HTTP 503: busy, try later"
