"""What every protocol's Locust user shares: the pace (closed loop: send, wait for the answer, think, repeat;
open loop: claim the process's next intended send time and sleep until it), and the once-per-process hooks a
protocol's user class fills in (what it prepares, what it starts beside the process, how it checks the
target before the run). A protocol is one subclass, which sends one request and records it
(Recorder.record_send decides how its lateness counts).

Importing this module imports Locust, which monkey-patches the standard library for gevent: import it only
in a process that generates load.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import gevent
from locust import User
from locust.env import Environment

from kaliper.loadgen.backoff import Backoff
from kaliper.loadgen.config import LoadGenConfig
from kaliper.loadgen.faults import Fault
from kaliper.loadgen.generator import Generator, StageWindows
from kaliper.loadgen.preflight import Preflight

HOLD_POLL_S = 0.01  # how often a held user looks whether the next stage has begun
SPIN_S = 0.0015  # libev rounds its waits up to whole milliseconds: wake this early, then yield until due


def _unused_task(user: User) -> None:  # pragma: no cover - run() replaces Locust's task loop
    raise NotImplementedError


class KaliperUser(User):
    """One user of a generator process: a tight loop instead of Locust's task scheduler, every request
    recorded into HDR histograms by completion window (Locust's own rounded statistics are not used)."""

    abstract = True
    tasks = [_unused_task]  # Locust insists on a task; run() below never schedules it
    # Spin to the intended send time instead of trusting gevent's timer (about 0.6 ms late): for requests
    # whose first answer comes within tens of milliseconds (generation), 1-2% of it.
    precise = False
    records_tokens = False  # its requests' token-stream figures are kept per window

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        self.generator: Generator = environment.kaliper_generator  # type: ignore[attr-defined]
        self.retry_after_s: float | None = None
        """What the server's last failing answer asked, in seconds (Retry-After); set by send_one."""
        self.place: int | None = None
        """A trace's send: the place in the whole schedule of the slot claimed last (the request it carries)."""

    # --- once per generator process ---------------------------------------------------------------------

    @classmethod
    def prepare(cls, generator: Generator) -> Any:
        """What every user of the process shares (requests made once, say); kept as generator.prepared."""
        return None

    @classmethod
    def stage_windows(cls, generator: Generator) -> StageWindows:
        """Where the process's stages run: by its own users unless the protocol starts a process beside it."""
        return generator.in_process

    @classmethod
    def preflight(cls, generator: Generator) -> Preflight:
        """An unreachable target fails in seconds, not after maxDuration: connect once with a short timeout,
        then ask the protocol's own question (`check`)."""
        config = generator.config
        try:
            address = (generator.host, generator.port)
            socket.create_connection(address, timeout=min(generator.timeout_s, 3.0)).close()
        except OSError as exc:
            return Preflight(f"target {config.url} is unreachable: {Fault.of(exc).words}")
        return cls.check(generator)

    @classmethod
    def check(cls, generator: Generator) -> Preflight:
        return Preflight()

    @classmethod
    def connections(cls, config: LoadGenConfig) -> int | None:
        """Connections each generator process keeps open (None: one per user, closed loop)."""
        return config.connections() if config.open_loop else None

    # --- each user ----------------------------------------------------------------------------------------

    def run(self) -> None:  # Locust calls this in the user's greenlet
        generator = self.generator
        recorder = generator.recorder
        open_loop = generator.config.open_loop
        backoff = Backoff()
        waited_s = waited_from = 0.0  # the wait after the last failure, if any, and when it began (wall clock)
        try:
            while True:
                while recorder.holding:  # measuring has ended: nothing starts until the next stage
                    gevent.sleep(HOLD_POLL_S)
                if not open_loop and (ahead_s := recorder.until_start(time.time())):
                    gevent.sleep(ahead_s)  # spawned before the stage begins: its first request is sent at it
                slot, claimed = self._wait_for_slot() if open_loop else (None, None)
                if recorder.holding:
                    continue  # claimed before the stage's end, due after it
                failed = self._send(slot, claimed)
                while (turn := self.next_turn(failed)) is not None:
                    # A conversation's next turn, this user's to send when it is due: in flight from the answer
                    # that it waits for (a stage that ends before it is sent counts it as unanswered).
                    slot, self.place = turn
                    recorder.sending(self)
                    self._sleep_until(slot, interruptible=True)
                    if recorder.holding:  # measuring ended before it was due: it is not sent
                        recorder.answered(self)
                        break
                    failed = self._send(slot, slot)
                if waited_s and not failed:
                    recorder.record_recovered(waited_from, waited_s)
                waited_s = 0.0 if open_loop else backoff.wait_s(failed, self.retry_after_s)
                if waited_s:
                    waited_from = time.time()
                    recorder.record_wait(waited_s, self.retry_after_s is not None, waited_from)
                if max(waited_s, generator.think_s):
                    gevent.sleep(max(waited_s, generator.think_s))
        finally:
            self.close()

    def _send(self, slot: float | None, claimed: float | None) -> bool:
        recorder = self.generator.recorder
        recorder.sending(self)
        try:
            return self.send_one(slot, claimed)
        finally:  # answered, failed, or the user stopped mid-request: no longer in flight
            recorder.answered(self)

    def next_turn(self, failed: bool) -> tuple[float, int] | None:
        """After a send: the next turn of a conversation this user is in (when it is due on the perf_counter
        clock, and its place in the trace), or None."""
        return None

    def send_one(self, slot: float | None, claimed: float | None) -> bool:
        """Send one request (due at `slot` under open loop, claimed at `claimed`) and record it; True when
        it failed."""
        raise NotImplementedError

    def close(self) -> None:
        pass

    def _wait_for_slot(self) -> tuple[float, float]:
        """Claim the next intended send time and sleep until it; returns it and when it was claimed (a claim
        after the slot was due means no connection was free in time)."""
        clock = time.perf_counter
        while (claim := self.generator.claim_slot()) is None:
            gevent.sleep(0.01)  # a trace replayed once has sent its last request: the stage ends soon
        slot, self.place = claim
        claimed = clock()
        self._sleep_until(slot)
        return slot, claimed

    def _sleep_until(self, due: float, interruptible: bool = False) -> None:
        """Sleep until `due` (perf_counter); `interruptible`: wake early when measuring ends."""
        clock = time.perf_counter
        now = clock()
        while interruptible and due - now > HOLD_POLL_S and not self.generator.recorder.holding:
            gevent.sleep(HOLD_POLL_S)
            now = clock()
        if due > now:
            gevent.sleep(max(0.0, due - now - SPIN_S) if self.precise else due - now)
            while self.precise and clock() < due:
                gevent.sleep(0)
