"""Open-loop send schedules: when each request is meant to leave, whatever the server is doing."""

from __future__ import annotations

import random
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
