"""Fitting token lengths to a Prometheus histogram and burstiness to request counts: against samples drawn
here from known distributions (numpy's generators, seeded), bucketed with vLLM's 1-2-5 edges."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kaliper.measure.workload_fit import FitError, fit_burstiness, fit_lognormal

VLLM_EDGES = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]  # build_1_2_5_buckets(8192)


def histogram(values: np.ndarray) -> tuple[list[float], float, float]:
    """What a Prometheus histogram of these integer values holds: cumulative counts per edge and +Inf."""
    cumulative = [float(np.sum(values <= edge)) for edge in VLLM_EDGES] + [float(len(values))]
    return cumulative, float(len(values)), float(values.sum())


def test_a_lognormal_is_recovered_from_vllms_coarse_buckets() -> None:
    rng = np.random.default_rng(7)
    sigma, mean = 0.6, 300.0
    values = np.maximum(np.round(rng.lognormal(math.log(mean) - sigma**2 / 2, sigma, 20000)), 1)
    cumulative, count, total = histogram(values)
    fit = fit_lognormal(VLLM_EDGES, cumulative, count, total)
    assert fit.mean == pytest.approx(float(values.mean()))  # the histogram's own sum / count
    assert fit.sigma == pytest.approx(0.6, rel=0.03)
    # stddev of a lognormal of mean 300 and sigma 0.6: 300 * sqrt(exp(0.36) - 1) = 197.5
    assert fit.stddev == pytest.approx(197.5, rel=0.05)
    assert (fit.smallest, fit.largest) == (21, 5000)  # the occupied buckets: 21-50 up to 2001-5000
    gap, _ = fit.largest_gap
    assert gap < 1.5
    # Each bucket's fitted share beside the observed one. At these parameters (mu = ln 300 - 0.18 = 5.524),
    # P(200 < X <= 500) = Phi((ln 500 - mu) / 0.6) - Phi((ln 200 - mu) / 0.6) = 0.875 - 0.354 = 0.521.
    row = next(b for b in fit.buckets if b.low == 200)
    assert row.observed / count == pytest.approx(0.521, abs=0.01)
    assert row.fitted == pytest.approx(row.observed / count, abs=0.01)


def test_a_histogram_no_lognormal_fits_says_so_by_its_gap() -> None:
    """Half the prompts 15 tokens, half 800: the one-peaked fit misses the share at or below 500 (half of them)
    by about 34 points."""
    values = np.array([15] * 500 + [800] * 500)
    fit = fit_lognormal(VLLM_EDGES, *histogram(values))
    gap, edge = fit.largest_gap
    assert (gap, edge) == (pytest.approx(34.2, abs=0.1), 500)
    assert fit.mean == pytest.approx(407.5)


def test_an_empty_histogram_is_refused() -> None:
    with pytest.raises(FitError, match="no observations"):
        fit_lognormal(VLLM_EDGES, [0.0] * 13, 0.0, 0.0)


def test_burstiness_from_literal_counts_and_its_interval() -> None:
    # pairs (10, 14) (12, 8) (10, 10) (9, 11): squared differences 16 16 0 4 -> variance 36 / 8 = 4.5; the mean
    # is 10.5, so the dispersion is 0.4286 and the shape 2.333; chi-square's 2.5% and 97.5% points with 4
    # degrees of freedom, 0.4844 and 11.143, give 0.4844 / (4 * 0.4286) = 0.283 to 11.143 / 1.714 = 6.50.
    fit = fit_burstiness([10, 14, 12, 8, 10, 10, 9, 11], 5.0)
    assert fit.burstiness == pytest.approx(2.333, rel=1e-3)
    assert (fit.low, fit.high) == (pytest.approx(0.283, rel=0.002), pytest.approx(6.50, rel=0.002))
    assert (fit.intervals, fit.interval_s, fit.busiest_rate) == (8, 5.0, 2.8)
    # Idle pairs (a quiet night) change neither the figure nor the number of intervals it comes from.
    assert fit_burstiness([0, 0, 10, 14, 12, 8, 0, 0, 10, 10, 9, 11, 0], 5.0) == fit


def gamma_counts(shape: float, rate: float, seconds: int, seed: int) -> list[float]:
    """Arrivals with gamma gaps of this shape at this mean rate, counted in whole seconds."""
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(shape, 1 / (rate * shape), int(rate * seconds * 1.2))
    times = np.cumsum(gaps)
    return np.bincount(times[times < seconds].astype(int), minlength=seconds).astype(float).tolist()


@pytest.mark.parametrize("shape", [0.25, 1.0, 4.0])
def test_a_gamma_processs_shape_is_recovered_from_its_counts(shape: float) -> None:
    """20 requests a second for 2,000 one-second intervals: 1,000 pairs make the interval about +-9%."""
    fit = fit_burstiness(gamma_counts(shape, 20, 2000, seed=3), 1.0)
    assert fit.burstiness == pytest.approx(shape, rel=0.15)
    assert fit.low < shape < fit.high


def test_a_rate_that_climbs_over_the_window_is_not_read_as_burstiness() -> None:
    """Poisson counts whose mean climbs from 10 to 100 a second (a daily peak): neighbours differ only by
    Poisson's noise, so the fit says Poisson, where the counts' plain variance would say very bursty."""
    rng = np.random.default_rng(11)
    counts = rng.poisson(np.linspace(10, 100, 1000)).astype(float).tolist()
    assert float(np.var(counts) / np.mean(counts)) > 10  # what a plain variance would read
    fit = fit_burstiness(counts, 1.0)
    assert fit.burstiness == pytest.approx(1.0, rel=0.15)


def test_too_few_intervals_or_a_constant_rate_are_refused() -> None:
    with pytest.raises(FitError, match="3 intervals of 5s with 30 requests: too few"):
        fit_burstiness([10, 10, 10], 5.0)
    with pytest.raises(FitError, match="a constant rate"):
        fit_burstiness([10, 10, 10, 10], 5.0)
