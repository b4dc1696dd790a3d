"""Open-loop send schedules: when each request is meant to leave, whatever the server is doing."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from typing import Literal


def send_offsets(rate: float, arrival: Literal["constant", "poisson"], seed: int | None = None) -> Iterator[float]:
    """Seconds from the start of a stage at which request 0, 1, 2, ... should be sent.

    constant: evenly spaced, 1/rate apart. poisson: exponential gaps with mean 1/rate (a Poisson process),
    what independent users arriving at that mean rate look like.
    """
    if rate <= 0:
        raise ValueError("rate must be greater than 0")
    if arrival == "constant":
        i = 0
        while True:
            yield i / rate
            i += 1
    rng = random.Random(seed)
    t = 0.0
    while True:
        yield t
        t += rng.expovariate(rate)


def stage_send_times(
    rate: float, arrival: Literal["constant", "poisson"], seed: int | None, stage: int, start_wall: float
) -> Iterator[float]:
    """A stage's intended send times on this process's perf_counter clock, from the stage's wall-clock start
    (which every generator process is given). Each stage draws its own arrivals from the run's seed."""
    base = time.perf_counter() + (start_wall - time.time())
    stage_seed = None if seed is None else seed * 1000 + stage
    return (base + offset for offset in send_offsets(rate, arrival, stage_seed))
