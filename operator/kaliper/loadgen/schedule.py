"""Open-loop send schedules: when each request is meant to leave, whatever the server is doing."""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

Arrival = Literal["constant", "poisson", "gamma"]
# A generator process's part of an open-loop schedule: (its index, how many processes share the schedule).
Part = tuple[int, int]
# An intended send time (perf_counter clock) and, for a trace, its place in the whole schedule (the request
# it carries); None: the users take the requests in turn.
Slot = tuple[float, int | None]


def send_offsets(rate: float, arrival: Arrival, seed: int | None = None, burstiness: float = 1.0) -> Iterator[float]:
    """Seconds from the start of a stage at which request 0, 1, 2, ... should be sent.

    constant: evenly spaced, 1/rate apart. poisson: exponential gaps with mean 1/rate (a Poisson process),
    what independent users arriving at that mean rate look like. gamma: gaps drawn from a gamma distribution of
    shape `burstiness` and mean 1/rate, as vLLM's and AIPerf's benchmarks draw them: shape 1 is the Poisson
    process, smaller shapes bunch sends into bursts with long quiet gaps between them.
    """
    if rate <= 0:
        raise ValueError("rate must be greater than 0")
    if burstiness <= 0:
        raise ValueError("burstiness must be greater than 0")
    if arrival == "constant":
        i = 0
        while True:
            yield i / rate
            i += 1
    rng = random.Random(seed)
    t = 0.0
    while True:
        yield t
        t += rng.expovariate(rate) if arrival == "poisson" else rng.gammavariate(burstiness, 1 / (rate * burstiness))


@dataclass(frozen=True)
class RampSchedule:
    """A rate that moves during the measurement: held at the stage's rate through the warm-up, then from it to
    `to` over `length_s` (linear: steadily; stepped: `segments` equal steps, the first at the stage's rate and
    the last at `to`), and held at `to` after."""

    to: float
    length_s: float
    warmup_s: float
    stepped: bool
    segments: int


@dataclass(frozen=True)
class Piece:
    """A stretch of a rate curve whose rate moves linearly from `start` to `end` requests per second."""

    duration_s: float
    start: float
    end: float

    @property
    def count(self) -> float:
        return (self.start + self.end) / 2 * self.duration_s


def ramp_pieces(rate: float, ramp: RampSchedule) -> list[Piece]:
    """The ramp's rate curve from the start of the stage (warm-up included); the last piece never ends."""
    pieces = [Piece(ramp.warmup_s, rate, rate)] if ramp.warmup_s > 0 else []
    if ramp.stepped:
        step_s = ramp.length_s / ramp.segments
        for i in range(ramp.segments):
            level = rate + (ramp.to - rate) * i / (ramp.segments - 1)
            pieces.append(Piece(step_s, level, level))
    else:
        pieces.append(Piece(ramp.length_s, rate, ramp.to))
    return [*pieces, Piece(math.inf, ramp.to, ramp.to)]


def time_at_count(count: float, pieces: list[Piece]) -> float:
    """When the curve's expected number of sends reaches `count`: the inverse of its cumulative rate."""
    t = 0.0
    for piece in pieces:
        if count <= piece.count:
            if piece.end == piece.start:
                return t + count / piece.start
            slope = (piece.end - piece.start) / piece.duration_s
            # The root of start*s + slope*s^2/2 = count, in the form that stays exact as the slope nears 0.
            return t + 2 * count / (piece.start + math.sqrt(piece.start**2 + 2 * slope * count))
        count -= piece.count
        t += piece.duration_s
    raise AssertionError("the last piece never ends")


def user_steps(users: int, ramp: RampSchedule) -> list[tuple[float, int]]:
    """A closed-loop ramp as (seconds from the stage's start, users from then on), from the end of the
    warm-up: a stepped ramp's `segments` levels (rounded to whole users), or a linear one's every whole user
    on the way, each when the straight line from `users` to `to` crosses the half-way point to it."""
    start, span = ramp.warmup_s, int(ramp.to) - users
    if ramp.stepped:
        step_s = ramp.length_s / ramp.segments
        levels = [round(users + span * i / (ramp.segments - 1)) for i in range(ramp.segments)]
        changes = [(start + i * step_s, level) for i, level in enumerate(levels)]
    else:
        direction = 1 if span >= 0 else -1
        passed = range(users + direction, int(ramp.to) + direction, direction)
        changes = [(start, users)] + [(start + ramp.length_s * (abs(k - users) - 0.5) / abs(span), k) for k in passed]
    # Only where the count changes: a step that rounds to the level before it is no step.
    return [change for i, change in enumerate(changes) if i == 0 or change[1] != changes[i - 1][1]]


def ramp_offsets(
    rate: float, ramp: RampSchedule, arrival: Arrival, seed: int | None = None, burstiness: float = 1.0
) -> Iterator[float]:
    """send_offsets on a ramp: the same arrivals drawn at one request per second, then stretched in time so
    that their rate follows the ramp (the time-rescaling of a point process), so a ramp is constant, Poisson
    or gamma-bursty at every rate it passes through."""
    pieces = ramp_pieces(rate, ramp)
    return (time_at_count(u, pieces) for u in send_offsets(1.0, arrival, seed, burstiness))


def stage_send_times(
    rate: float,
    arrival: Arrival,
    seed: int | None,
    stage: int,
    start_wall: float,
    burstiness: float = 1.0,
    part: Part = (0, 1),
    ramp: RampSchedule | None = None,
) -> Iterator[float]:
    """A stage's intended send times on this process's perf_counter clock, from the stage's wall-clock start
    (which every generator process is given). Each stage draws its own arrivals from the run's seed.

    `rate` is the whole schedule's; process i of n sends requests i, i + n, i + 2n, ... of it, so together
    the processes send the one schedule, Poisson or gamma bursts included (each drawing its own at a part of
    the rate would send n copies of one random schedule, in step)."""
    base = time.perf_counter() + (start_wall - time.time())
    stage_seed = None if seed is None else seed * 1000 + stage
    index, count = part
    whole = (
        send_offsets(rate, arrival, stage_seed, burstiness)
        if ramp is None
        else ramp_offsets(rate, ramp, arrival, stage_seed, burstiness)
    )
    offsets = itertools.islice(whole, index, None, count)
    return (base + offset for offset in offsets)
