from __future__ import annotations

import itertools
import statistics
import time

import pytest

from kaliper.loadgen.schedule import RampSchedule, ramp_offsets, send_offsets, stage_send_times, user_steps


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


def test_gamma_schedule_has_the_mean_rate_and_the_burstiness_asked() -> None:
    # Gaps of shape k and mean 1/rate have a coefficient of variation 1/sqrt(k): 2 at k = 0.25 (bursts and long
    # quiet gaps), 1 at k = 1 (the Poisson process), 0.5 at k = 4 (more even than Poisson).
    for burstiness, variation in ((0.25, 2.0), (1.0, 1.0), (4.0, 0.5)):
        offsets = list(itertools.islice(send_offsets(100, "gamma", seed=42, burstiness=burstiness), 20_001))
        gaps = [b - a for a, b in itertools.pairwise(offsets)]
        assert statistics.fmean(gaps) == pytest.approx(0.01, rel=0.03)
        assert statistics.pstdev(gaps) / statistics.fmean(gaps) == pytest.approx(variation, rel=0.05)


def test_processes_sharing_a_schedule_send_it_once_between_them() -> None:
    start_wall = time.time() + 1
    whole = list(itertools.islice(stage_send_times(90, "poisson", 7, 0, start_wall), 300))
    parts = [
        list(itertools.islice(stage_send_times(90, "poisson", 7, 0, start_wall, part=(i, 3)), 100)) for i in range(3)
    ]
    assert [len(p) for p in parts] == [100, 100, 100]
    merged = sorted(t for p in parts for t in p)
    # Each process reads its own clock, so times agree to within the microseconds between their readings.
    assert merged == pytest.approx(whole, abs=1e-3)
    assert len({round(t, 9) for t in merged}) == 300  # no send twice: not three copies of one schedule


def test_burstiness_must_be_positive() -> None:
    with pytest.raises(ValueError, match="burstiness"):
        next(send_offsets(10, "gamma", burstiness=0))


def test_a_stepped_ramp_holds_each_rate_for_its_part_of_the_measurement() -> None:
    # 1 s of warm-up at 10 a second, then 10, 20 and 30 a second for 1 s each, and 30 a second after.
    ramp = RampSchedule(to=30, length_s=3, warmup_s=1, stepped=True, segments=3)
    offsets = list(itertools.islice(ramp_offsets(10, ramp, "constant"), 70))
    per_second = [sum(1 for t in offsets if i <= t < i + 1 - 1e-9) for i in range(5)]
    assert per_second == [10, 10, 20, 30, 0]
    assert offsets[20:23] == pytest.approx([2.0, 2.05, 2.1])
    assert offsets[69] == pytest.approx(4.0 - 1 / 30)


def test_a_linear_ramp_sends_the_area_under_its_rate_and_keeps_its_arrivals_kind() -> None:
    # From 100 to 300 a second over 10 s: 2000 sends in all, the first second 110, the last 290.
    ramp = RampSchedule(to=300, length_s=10, warmup_s=0, stepped=False, segments=4)
    offsets = list(itertools.islice(ramp_offsets(100, ramp, "constant"), 2001))
    assert offsets[2000] == pytest.approx(10.0)
    assert sum(1 for t in offsets if t < 1) == 110 and sum(1 for t in offsets if 9 <= t < 10) == 290
    # A ramp down passes the same rates the other way.
    down = RampSchedule(to=100, length_s=10, warmup_s=0, stepped=False, segments=4)
    assert list(itertools.islice(ramp_offsets(300, down, "constant"), 2001))[2000] == pytest.approx(10.0)
    # Gamma arrivals of shape 0.25 on the ramp: the gaps stay bursty (CV 2) once divided by the rate's trend.
    bursty = list(itertools.islice(ramp_offsets(100, ramp, "gamma", seed=3, burstiness=0.25), 2000))
    assert sum(1 for t in bursty if t < 10) == pytest.approx(2000, rel=0.15)
    early = [b - a for a, b in itertools.pairwise(t for t in bursty if t < 2)]
    assert statistics.pstdev(early) / statistics.fmean(early) == pytest.approx(2.0, rel=0.3)


def test_a_closed_loop_ramp_changes_the_users_at_each_step_or_each_whole_user_on_the_line() -> None:
    # Stepped, after a 1 s warm-up: 1, 2, 3, 4 users for a second each.
    assert user_steps(1, RampSchedule(4, 4, 1, True, 4)) == [(1.0, 1), (2.0, 2), (3.0, 3), (4.0, 4)]
    # Linear 1 -> 4 over 6 s: each next user where the line crosses half-way to it (t = 1, 3, 5).
    assert user_steps(1, RampSchedule(4, 6, 0, False, 4)) == [(0, 1), (1.0, 2), (3.0, 3), (5.0, 4)]
    # Down, and steps that round to the level before them are no steps.
    assert user_steps(4, RampSchedule(2, 4, 0, False, 4)) == [(0, 4), (1.0, 3), (3.0, 2)]
    assert user_steps(2, RampSchedule(3, 8, 0, True, 4)) == [(0.0, 2), (4.0, 3)]
    assert user_steps(3, RampSchedule(3, 8, 0, False, 4)) == [(0, 3)]
