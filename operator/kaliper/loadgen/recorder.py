"""Per-window recording in each generator process, and exact merging of windows across processes.

A request belongs to the window in which it completed (wall-clock time, so processes on different machines
agree within clock skew), sent within the measurement: one sent during the warm-up and answered after it is in
no measured window, and one sent before the measurement ended is awaited into the stage's drain, so that a
stage counts the requests the server received in its window (a send that left late counts where it left, and
is counted late). A window is closed once the clock has passed its end; closed windows travel as
encoded histograms to whoever aggregates them (the same process, or the Locust master).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from kaliper.loadgen.backoff import Recoveries
from kaliper.loadgen.faults import Fault
from kaliper.loadgen.tokens import Reached, RequestTokens, TokenWindow
from kaliper.measure.cpu import CpuClock
from kaliper.measure.figures import figure
from kaliper.measure.histogram import LatencyHistogram
from kaliper.measure.judgement import Bound

# A send is late when it leaves more than this after its intended time. gevent's timers wake up to about a
# millisecond late on an idle machine, so a tighter bound would call every send late.
LATE_AFTER_S = 0.002

# The server's own words kept for each error kind: the first few distinct messages, each cut to a length.
MESSAGES_PER_KIND = 3
MESSAGE_CHARS = 200


def keep_message(messages: dict[str, list[str]], kind: str, message: str) -> None:
    """Keep `message` under `kind` if it is new and the kind has room (bounded in count and length); a
    message that starts with its kind ("error event mid-stream: engine dead") is kept without it, since it is
    shown under its kind."""
    kept = messages.setdefault(kind, [])
    text = " ".join(message.split())
    if text.startswith(kind + ":"):
        text = text[len(kind) + 1 :].strip()
    text = text[:MESSAGE_CHARS]
    if text and len(kept) < MESSAGES_PER_KIND and text not in kept:
        kept.append(text)


@runtime_checkable
class Reaching(Protocol):
    """A sender that can say which figures its request in flight has reached (a stream's first token)."""

    def reached(self) -> Reached | None: ...


@dataclass
class Window:
    """Everything measured in one window of one stage: mergeable."""

    stage: int
    index: int
    service: LatencyHistogram = field(default_factory=LatencyHistogram)
    """Answered requests only: from the send to the answer's last byte. A failure is no answer, however fast;
    the SLO verdicts count failures as beyond every latency bound (kaliper.profiling.decisions)."""
    # Latency from the intended send time (open loop only; equal to `service` under closed loop).
    corrected: LatencyHistogram | None = None
    failed: LatencyHistogram = field(default_factory=LatencyHistogram)
    """Failed requests: from the send to the failure."""
    requests: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    unanswered: int = 0
    """Of the failed requests, those the target did not answer at all (refused, lost before any answer): a
    whole span of windows of nothing else means the target is down (kaliper.loadgen.stopping)."""
    late_no_connection: int = 0  # sends that waited because every connection was busy
    late_generator: int = 0  # sends that left late although a connection was free (generator too slow)
    bytes_sent: int = 0
    bytes_received: int = 0
    # CPU-seconds the generator processes used in this window, and could have used (summed over processes).
    cpu_s: float = 0.0
    capacity_s: float = 0.0
    tokens: TokenWindow | None = None
    """Generation requests only: time to first token, the gaps between tokens, token counts."""
    resent: int = 0
    """Requests sent again on a new connection after a kept-alive one was found dead before any answer (not
    counted as errors: the server had closed it)."""
    messages: dict[str, list[str]] = field(default_factory=dict)
    """Error kind -> the first few distinct messages the server (or the connection) gave."""
    waits: int = 0
    """Closed loop: times a user waited after a failure before sending again (kaliper.loadgen.backoff)."""
    waited_s: float = 0.0
    retry_after_waits: int = 0
    """Of those, the waits the server asked for with Retry-After."""
    in_flight: int = 0
    """Requests sent before the window's end and not answered by it (summed over processes)."""
    in_flight_oldest_s: float = 0.0
    """How long the oldest of them had run at the window's end."""
    reached: Counter[str] = field(default_factory=Counter)
    """A drain window: of its requests still in flight, how many reached each figure (ttft, ttfot), recorded
    in that figure's distribution."""
    failing_s: float = 0.0
    """Closed loop: user-seconds spent failing: in failed requests, and backing off after them (up to when the
    server came back, kaliper.loadgen.backoff.Recoveries)."""
    user_s: float = 0.0
    """Closed loop: user-seconds spent in requests and waits (the share's whole)."""
    first_answers: dict[str, float] = field(default_factory=dict)
    """Each server that named itself in its answers (the Kaliper-Replica header): when it first answered (wall
    clock) in this window."""
    good: int = 0
    """Requests answered within every latency objective of the SLO, as their users saw them (from the intended
    send under open loop): the window's SLO attainment is good / requests."""

    def merge(self, other: Window) -> Window:
        self.service.add(other.service)
        self.failed.add(other.failed)
        if other.corrected is not None:
            self.corrected = (self.corrected or LatencyHistogram()).add(other.corrected)
        self.requests += other.requests
        self.errors.update(other.errors)
        self.unanswered += other.unanswered
        self.late_no_connection += other.late_no_connection
        self.late_generator += other.late_generator
        self.bytes_sent += other.bytes_sent
        self.bytes_received += other.bytes_received
        self.cpu_s += other.cpu_s
        self.capacity_s += other.capacity_s
        self.resent += other.resent
        self.waits += other.waits
        self.waited_s += other.waited_s
        self.retry_after_waits += other.retry_after_waits
        self.failing_s += other.failing_s
        self.user_s += other.user_s
        self.good += other.good
        for replica, at in other.first_answers.items():
            self.first_answers[replica] = min(at, self.first_answers.get(replica, at))
        self.in_flight += other.in_flight
        self.reached.update(other.reached)
        self.in_flight_oldest_s = max(self.in_flight_oldest_s, other.in_flight_oldest_s)
        for kind, texts in other.messages.items():
            for text in texts:
                keep_message(self.messages, kind, text)
        if other.tokens is not None:
            self.tokens = (self.tokens or TokenWindow()).merge(other.tokens)
        return self

    def count(
        self,
        completed_wall: float,
        service_s: float,
        corrected_s: float | None,
        fault: Fault | None,
        sent: int,
        received: int,
        resent: int,
        tokens: RequestTokens | None,
        good: bool,
        replica: str | None,
    ) -> None:
        """One request that ended in this window (kaliper.loadgen.recorder.Recorder.record decides which)."""
        closed_loop = self.corrected is None
        self.resent += resent
        if tokens is not None and self.tokens is not None:
            self.tokens.record(tokens, good, failed=fault is not None)
        self.bytes_sent += sent
        self.bytes_received += received
        self.requests += 1
        if closed_loop:
            self.user_s += service_s
        if fault is not None:
            self.errors[fault.kind.name] += 1
            self.unanswered += not fault.answered
            self.failed.record(service_s)
            if closed_loop:
                self.failing_s += service_s
            if fault.message:
                keep_message(self.messages, fault.kind.name, fault.message)
        else:
            self.service.record(service_s)
            if self.corrected is not None:
                self.corrected.record(corrected_s if corrected_s is not None else service_s)
        self.good += good
        if replica is not None and fault is None:
            self.first_answers[replica] = min(completed_wall, self.first_answers.get(replica, completed_wall))

    @property
    def latency(self) -> LatencyHistogram:
        """What users experience: corrected latency under open loop, service time under closed loop."""
        return self.corrected if self.corrected is not None else self.service

    def histogram(self, metric: str, corrected: bool = True) -> LatencyHistogram:
        """The distribution a stopping rule or an objective watches (a figure of kaliper.measure.figures);
        corrected for coordinated omission, where the figure has a corrected form under open loop, unless
        `corrected` is False."""
        row = figure(metric)
        holder = (self.tokens or TokenWindow()) if row.token else self
        found = getattr(holder, row.window_corrected) if corrected and row.window_corrected else None
        return found if found is not None else getattr(holder, row.window)

    def to_wire(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "index": self.index,
            "service": self.service.encode(),
            "corrected": self.corrected.encode() if self.corrected is not None else None,
            "failed": self.failed.encode(),
            "requests": self.requests,
            "errors": dict(self.errors),
            "unanswered": self.unanswered,
            "late_no_connection": self.late_no_connection,
            "late_generator": self.late_generator,
            "bytes_sent": self.bytes_sent,
            "bytes_received": self.bytes_received,
            "cpu_s": self.cpu_s,
            "capacity_s": self.capacity_s,
            "resent": self.resent,
            "messages": self.messages,
            "waits": [self.waits, self.waited_s, self.retry_after_waits],
            "in_flight": [self.in_flight, self.in_flight_oldest_s],
            "time": [self.failing_s, self.user_s],
            "good": self.good,
            "first_answers": self.first_answers,
            "reached": dict(self.reached),
            "tokens": self.tokens.to_wire() if self.tokens is not None else None,
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Window:
        return cls(
            stage=data["stage"],
            index=data["index"],
            service=LatencyHistogram.decode(data["service"]),
            corrected=LatencyHistogram.decode(data["corrected"]) if data["corrected"] else None,
            failed=LatencyHistogram.decode(data["failed"]),
            requests=data["requests"],
            errors=Counter(data["errors"]),
            unanswered=data.get("unanswered", 0),
            late_no_connection=data["late_no_connection"],
            late_generator=data["late_generator"],
            bytes_sent=data.get("bytes_sent", 0),
            bytes_received=data.get("bytes_received", 0),
            cpu_s=data.get("cpu_s", 0.0),
            capacity_s=data.get("capacity_s", 0.0),
            resent=data.get("resent", 0),
            messages=data.get("messages", {}),
            waits=data["waits"][0],
            waited_s=data["waits"][1],
            retry_after_waits=data["waits"][2],
            in_flight=data["in_flight"][0],
            in_flight_oldest_s=data["in_flight"][1],
            reached=Counter(data.get("reached", {})),
            failing_s=data["time"][0],
            user_s=data["time"][1],
            good=data.get("good", 0),
            first_answers=data.get("first_answers", {}),
            tokens=TokenWindow.from_wire(data["tokens"]) if data.get("tokens") else None,
        )


EDGE_GRACE_S = 0.001


def within_bounds(bounds: list[Bound], service_s: float, corrected_s: float | None) -> bool:
    """An answered request's latency within every whole-request bound (from its intended send where the bound is
    corrected and the send had one)."""
    return all(
        (corrected_s if bound.corrected and corrected_s is not None else service_s) <= bound.bound_s for bound in bounds
    )


def spans(stage_start: float, window_s: float, from_wall: float, seconds: float) -> Iterator[tuple[int, float]]:
    """The windows (by index) that `seconds` from `from_wall` span, with the seconds in each."""
    index = int((from_wall - stage_start) // window_s)
    while seconds > 0:
        part = min(seconds, stage_start + (index + 1) * window_s - from_wall)
        yield index, part
        seconds, from_wall, index = seconds - part, from_wall + part, index + 1


class Recorder:
    """Records requests of the current stage into windows; hands out the windows that have closed. When
    measuring ends it drains (k6's gracefulStop): no request starts, and those sent before the end are awaited
    and recorded with their real figures into one more window, the stage's drain."""

    def __init__(
        self,
        window_s: float,
        open_loop: bool,
        tokens: bool = False,
        warmup_s: float = 0.0,
        bounds: Sequence[Bound] = (),
    ) -> None:
        self.window_s = window_s
        # The SLO's whole-request latency objectives: what makes a request good where its caller does not say
        # (a generation request's caller judges its token figures too).
        self.bounds = [b for b in bounds if b.whole]
        self.open_loop = open_loop
        self.warmup_s = warmup_s  # from each stage's start: what is meant for it is in no measured window
        self.tokens = tokens  # its windows keep token-stream figures
        self.stage = -1
        self.stage_start = 0.0
        self._windows: dict[int, Window] = {}
        # Per window: what completed in it of the requests sent before it began (a drain's first answers).
        self._carried: dict[int, Window] = {}
        self._current: Window | None = None
        self._current_end = -math.inf
        self._cpu = CpuClock()
        self._in_flight: dict[object, float] = {}  # each sender -> when (wall clock) its request left
        self._taken_until = -1  # the last window of this stage handed out
        self.holding = False
        """Measuring has ended: users send nothing until the next stage begins."""
        self._drain: Window | None = None
        self._drain_edge = math.inf  # measuring ended here: requests sent before it are awaited
        self.recoveries = Recoveries()  # closed loop: what shows when a server came back during a wait

    def new_window(self, index: int) -> Window:
        window = Window(self.stage, index, corrected=LatencyHistogram() if self.open_loop else None)
        if self.tokens:
            window.tokens = TokenWindow.for_load(self.open_loop)
        return window

    def sending(self, sender: object, at_wall: float | None = None) -> None:
        """`sender` (a user) sends a request now (or at `at_wall`); `answered` when it has its answer, or failure."""
        self._in_flight[sender] = time.time() if at_wall is None else at_wall

    def answered(self, sender: object) -> None:
        self._in_flight.pop(sender, None)

    def begin_stage(self, stage: int, start_wall: float) -> None:
        self.stage, self.stage_start = stage, start_wall
        self._windows, self._carried, self._current, self._current_end = {}, {}, None, -math.inf
        self._taken_until = -1
        self.holding, self._drain, self._drain_edge = False, None, math.inf

    def until_start(self, now_wall: float) -> float:
        """Seconds until the stage begins (0 once it has): a closed loop's users, started ahead of it, send
        nothing before it, so that no request of theirs is meant for before the stage."""
        return max(0.0, self.stage_start - now_wall)

    def begin_drain(self, edge_wall: float) -> None:
        """Measuring ended at `edge_wall` (the last measured window's end): hold every user, and record what
        completes from now on of the requests sent before the edge into the drain window, which starts with
        those that completed between the edge and now."""
        index = round((edge_wall - self.stage_start) / self.window_s)
        self._drain = self._carried.get(index) or self.new_window(index)
        self._drain_edge, self.holding = edge_wall, True
        self._windows, self._carried, self._current, self._current_end = {}, {}, None, -math.inf

    def drain_pending(self, now_wall: float) -> tuple[int, float]:
        """The requests sent before the drain's edge and not yet answered, and how long the oldest has run."""
        sent = [at for at in self._in_flight.values() if at < self._drain_edge]
        return len(sent), (now_wall - min(sent) if sent else 0.0)

    def finish_drain(self, now_wall: float) -> Window:
        """The drain window, with what is still unanswered as its requests in flight and the figures they
        reached (a stream's time to first token, where its first token came); the users stay held."""
        window = self._drain or self.new_window(-1)
        window.in_flight, window.in_flight_oldest_s = self.drain_pending(now_wall)
        for sender, at in self._in_flight.items():
            reached = sender.reached() if at < self._drain_edge and isinstance(sender, Reaching) else None
            if reached is not None and window.tokens is not None:
                window.reached.update(window.tokens.record_reached(reached))
        self._drain, self._drain_edge = None, -math.inf  # whatever completes from now on is in no figure
        return window

    def _window_at(self, index: int) -> Window:
        if index not in self._windows:
            self._windows[index] = self.new_window(index)
        return self._windows[index]

    def _window_for(self, completed_wall: float) -> Window | None:
        if self._current is not None and self._current_end - self.window_s <= completed_wall < self._current_end:
            return self._current
        offset = completed_wall - self.stage_start
        if offset < 0 or self.stage < 0:
            return None  # a straggler from before this stage began
        index = int(offset // self.window_s)
        window = self._window_at(index)
        self._current, self._current_end = window, self.stage_start + (index + 1) * self.window_s
        return window

    def record(
        self,
        completed_wall: float,
        service_s: float,
        corrected_s: float | None = None,
        fault: Fault | None = None,
        late_no_connection: bool = False,
        late_generator: bool = False,
        sent: int = 0,
        received: int = 0,
        resent: int = 0,
        tokens: RequestTokens | None = None,
        good: bool | None = None,
        replica: str | None = None,
    ) -> None:
        if good is None:
            good = fault is None and within_bounds(self.bounds, service_s, corrected_s)
        sent_wall = completed_wall - service_s
        if not self.open_loop:
            self.recoveries.seen(sent_wall, completed_wall, failed=fault is not None)
        # Sent during the warm-up (or the stage before) and answered once measuring began: in no figure, as the
        # server received it before the window. (A millisecond's grace: the send time comes back through two
        # clocks, and a stage's first send is due at its very start.)
        measured_from = self.stage_start + self.warmup_s
        if sent_wall < measured_from - EDGE_GRACE_S and measured_from <= completed_wall:
            return
        if self.holding:
            if self._drain is None or sent_wall >= self._drain_edge:
                return  # sent after measuring ended (or answered after the drain): in no figure
            windows = [self._drain]
        else:
            window = self._window_for(completed_wall)
            if window is None:
                return
            windows = [window]
            if sent_wall < self._current_end - self.window_s:  # in flight at the window's start
                carried = self._carried.get(window.index)
                if carried is None:
                    carried = self._carried[window.index] = self.new_window(window.index)
                windows.append(carried)
        for window in windows:
            window.count(completed_wall, service_s, corrected_s, fault, sent, received, resent, tokens, good, replica)
            if late_no_connection:
                window.late_no_connection += 1
            elif late_generator:
                window.late_generator += 1

    def record_send(
        self,
        slot: float | None,
        claimed: float | None,
        start: float,
        end: float,
        fault: Fault | None,
        sent: int,
        received: int,
        resent: int = 0,
        tokens: RequestTokens | None = None,
        good: bool | None = None,
        replica: str | None = None,
    ) -> None:
        """One request on the perf_counter clock, whatever its protocol: sent at `start`, answered at `end`.
        Open loop: due at `slot`, claimed by a user at `claimed`; its latency counts from when it was due, and
        a late send is blamed on the connections when none was free in time (claimed after it was due), else
        on the generator. Closed loop (no slot): its latency is its service time."""
        late = slot is not None and start - slot > LATE_AFTER_S
        self.record(
            time.time(),
            end - start,
            end - slot if slot is not None else None,
            fault,
            late_no_connection=late and claimed is not None and slot is not None and claimed > slot + LATE_AFTER_S,
            late_generator=late,
            sent=sent,
            received=received,
            resent=resent,
            tokens=tokens,
            good=good,
            replica=replica,
        )

    def record_wait(self, seconds: float, retry_after: bool, at_wall: float | None = None) -> None:
        """A user backing off after a failure (closed loop), from `at_wall` (now unless given): counted in the
        window of the failure it follows, its seconds spread over the windows it spans, as failing time until
        `record_recovered` says the next request was answered."""
        now = time.time() if at_wall is None else at_wall
        window = None if self.holding else self._window_for(now)
        if window is None:
            return
        window.waits += 1
        window.retry_after_waits += retry_after
        for index, part in spans(self.stage_start, self.window_s, now, seconds):
            spanned = self._window_at(index)
            spanned.waited_s += part
            spanned.user_s += part
            spanned.failing_s += part

    def record_recovered(self, waited_from: float, waited_s: float) -> None:
        """The request after a wait of `waited_s` from `waited_from` (wall clock) was answered: the part of the
        wait after the server came back, as the requests sent during it show (kaliper.loadgen.backoff.
        Recoveries), was not failing time."""
        window = None if self.holding else self._window_for(waited_from)
        if window is None:
            return
        failing = self.recoveries.failing_part(waited_from, waited_from + waited_s)
        for index, part in spans(self.stage_start, self.window_s, waited_from + failing, waited_s - failing):
            self._window_at(index).failing_s -= part

    def closed_until(self, now_wall: float) -> int:
        """Index of the last window of this stage whose end has passed (-1 if none)."""
        if self.stage < 0:
            return -1
        return int((now_wall - self.stage_start) // self.window_s) - 1

    def take_closed(self, now_wall: float) -> tuple[list[Window], int]:
        """The closed windows recorded so far (removed from the recorder) and the watermark they close."""
        until = self.closed_until(now_wall)
        if self.holding:
            return [], until  # measuring has ended: the drain window is handed out on its own
        for index in range(self._taken_until + 1, until + 1):  # a window without an answer still has its edge
            self._window_at(index)
        self._taken_until = max(self._taken_until, until)
        done = [w for i, w in sorted(self._windows.items()) if i <= until]
        if done:
            # The CPU used since the last windows closed is spread over the ones closing now.
            cores = self._cpu.cores_since_mark(now_wall)
            for window in done:
                window.cpu_s, window.capacity_s = cores * self.window_s, self._cpu.capacity * self.window_s
        for window in done:
            end = self.stage_start + (window.index + 1) * self.window_s
            # Sent before the window's end and still unanswered now: in flight at its end. (One answered
            # between the end and now is in a later window, as every request is in the window it ended in.
            # Counting it as unanswered too was tried: every closed loop then ended with all its users'
            # requests unanswered, answered or not, and a knee search's two users on a 200 ms server read
            # Inconclusive at 194 answers. A stage that such requests leave undecided measures on instead.)
            started = [at for at in self._in_flight.values() if at < end]
            window.in_flight = len(started)
            window.in_flight_oldest_s = end - min(started) if started else 0.0
        for window in done:
            del self._windows[window.index]
            self._carried.pop(window.index - 1, None)  # a drain after this window starts with its own carried
            if window is self._current:
                self._current, self._current_end = None, -math.inf
        return done, until


class Aggregator:
    """Merges windows from every source; a window is complete once every source has closed it."""

    def __init__(self, sources: int) -> None:
        self.sources = sources
        self.windows: dict[tuple[int, int], Window] = {}
        self.watermarks: dict[tuple[str, int], int] = {}  # (source, stage) -> last closed window index

    def add(self, source: str, stage: int, windows: list[Window], closed_until: int) -> None:
        for window in windows:
            key = (window.stage, window.index)
            if key in self.windows:
                self.windows[key].merge(window)
            else:
                self.windows[key] = window
        previous = self.watermarks.get((source, stage), -1)
        self.watermarks[(source, stage)] = max(previous, closed_until)

    def complete_until(self, stage: int) -> int:
        """Last window index of the stage that every source has closed."""
        marks = [m for (_, s), m in self.watermarks.items() if s == stage]
        if len(marks) < self.sources:
            return -1
        return min(marks)

    def stage_windows(self, stage: int, until: int) -> list[Window]:
        """Windows 0..until of a stage, with empty ones where nothing completed."""
        return [self.windows.get((stage, i)) or Window(stage, i) for i in range(until + 1)]
