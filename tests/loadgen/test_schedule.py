from __future__ import annotations

import itertools
import statistics

import pytest

from kaliper.loadgen.schedule import send_offsets


def test_constant_schedule_is_evenly_spaced() -> None:
    offsets = list(itertools.islice(send_offsets(200, "constant"), 1001))
    assert offsets[0] == 0 and offsets[-1] == pytest.approx(5.0)
    gaps = {round(b - a, 9) for a, b in itertools.pairwise(offsets)}
    assert gaps == {0.005}


def test_poisson_schedule_has_the_mean_rate_and_exponential_gaps() -> None:
    offsets = list(itertools.islice(send_offsets(100, "poisson", seed=42), 20_001))
    gaps = [b - a for a, b in itertools.pairwise(offsets)]
    assert statistics.fmean(gaps) == pytest.approx(0.01, rel=0.03)
    # Exponential: the standard deviation equals the mean (a constant schedule would have none).
    assert statistics.pstdev(gaps) == pytest.approx(0.01, rel=0.05)


def test_poisson_schedule_is_repeatable_with_a_seed() -> None:
    first = list(itertools.islice(send_offsets(50, "poisson", seed=7), 100))
    assert first == list(itertools.islice(send_offsets(50, "poisson", seed=7), 100))
    assert first != list(itertools.islice(send_offsets(50, "poisson", seed=8), 100))


def test_rate_must_be_positive() -> None:
    with pytest.raises(ValueError, match="rate"):
        next(send_offsets(0, "constant"))
