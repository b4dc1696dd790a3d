"""A fitted workload written as a ProfileRun's sections, and the reading of Prometheus's raw samples behind it."""

from __future__ import annotations

import pytest

from kaliper.api.resources import ProfileRun
from kaliper.measure.workload_fit import Bucket, BurstinessFit, LengthFit, WorkloadFit
from kaliper.metrics.workload_query import WorkloadError, _counts_per_interval, normalise_selector, series_increase
from kaliper.profiling.workload import SectionsError, apply_to, arrival_section, fit_lines, sections

PROMPTS = LengthFit(
    count=1000,
    mean=312.4,
    stddev=201.26,
    sigma=0.58,
    smallest=21,
    largest=2000,
    buckets=[
        Bucket(0, 20, 0, 0.001),
        Bucket(20, 50, 10, 0.012),
        Bucket(50, 100, 60, 0.058),
        Bucket(100, 200, 300, 0.31),
        Bucket(200, 500, 500, 0.49),
        Bucket(500, 1000, 100, 0.1),
        Bucket(1000, 2000, 30, 0.029),
        Bucket(2000, None, 0, 0.0),
    ],
)
ANSWERS = LengthFit(
    count=1000, mean=0.7, stddev=0.3, sigma=0.4, smallest=1, largest=None, buckets=[Bucket(0, 1, 1000, 1)]
)


def fitted(burstiness: BurstinessFit | None, prefix: float | None = 0.4712) -> WorkloadFit:
    return WorkloadFit(600, 'model_name="m"', PROMPTS, ANSWERS, 1000, 1.66667, 2, burstiness, prefix)


BURSTY = BurstinessFit(0.31, 0.22, 0.45, 120, 5.0, 3.2, 4.2)


def test_the_sections_of_a_bursty_workload() -> None:
    assert sections(fitted(BURSTY), {"file": "tok.json"}) == {
        "payload": {
            "prompts": {
                "synthetic": {
                    "inputTokens": {"distribution": "lognormal", "mean": 312, "stddev": 201.3, "min": 21, "max": 2000},
                    # a mean under one token is asked as one; no max when the +Inf bucket holds answers
                    "outputTokens": {"distribution": "lognormal", "mean": 1, "stddev": 0.3, "min": 1},
                    "sharedPrefixRatio": 0.47,
                },
                "tokenizer": {"file": "tok.json"},
            }
        },
        "load": {"openLoop": {"rate": 1.667, "arrival": "gamma", "burstiness": 0.31}},
    }


def test_arrivals_that_cannot_be_told_from_poisson_or_were_not_fitted_are_poisson() -> None:
    assert arrival_section(fitted(BurstinessFit(0.8, 0.6, 1.1, 120, 5.0, 1.25, 0.5))) == {
        "rate": 1.667,
        "arrival": "poisson",
    }
    assert arrival_section(fitted(None)) == {"rate": 1.667, "arrival": "poisson"}


def test_the_sections_replace_only_the_prompts_and_the_load_model_of_a_profilerun() -> None:
    run = {
        "apiVersion": "kaliper.dev/v1alpha1",
        "kind": "ProfileRun",
        "metadata": {"name": "r"},
        "spec": {
            "target": {"url": "http://127.0.0.1:8000"},
            "request": {"protocol": "openai-chat", "modelName": "m"},
            "payload": {"prompts": {"dataset": {"file": "d.jsonl"}, "tokenizer": {"file": "t.json"}}},
            "load": {"closedLoop": {"users": 4}, "maxDuration": "60s", "processes": 2},
        },
    }
    out = apply_to(run, fitted(BURSTY, prefix=None), None)
    assert out["spec"]["payload"]["prompts"]["tokenizer"] == {"file": "t.json"}
    assert "sharedPrefixRatio" not in out["spec"]["payload"]["prompts"]["synthetic"]
    assert out["spec"]["load"] == {
        "maxDuration": "60s",
        "processes": 2,
        "openLoop": {"rate": 1.667, "arrival": "gamma", "burstiness": 0.31},
    }
    assert run["spec"]["load"]["closedLoop"] == {"users": 4}  # the input is left as it was
    ProfileRun.model_validate(out)  # and the result is a valid ProfileRun

    del run["spec"]["payload"]["prompts"]["tokenizer"]
    with pytest.raises(SectionsError, match=r"give --tokenizer FILE, or set spec\.payload\.prompts\.tokenizer"):
        apply_to(run, fitted(BURSTY), None)
    with pytest.raises(SectionsError, match="--into needs a ProfileRun manifest"):
        apply_to({"kind": "ModelDeployment", "spec": {}}, fitted(BURSTY), None)


def test_the_fit_report_says_what_came_from_where_and_how_well() -> None:
    lines = fit_lines(fitted(BURSTY))
    assert lines[:3] == [
        '1,000 requests finished in 600s by {model_name="m"} (2 replicas): 1.667 requests/s together',
        "arrivals: burstiness 0.31 (95%: 0.22-0.45) from 120 intervals of 5s; burstier than Poisson: gamma arrivals",
        "busiest interval: 4.2 requests/s",
    ]
    # The cumulative shares: observed 1%, 7%, 37%, 87%, 97% against fitted 1.3%, 7.1%, 38.1%, 87.1%, 97.1%.
    assert lines[3].startswith("input tokens: lognormal, mean 312.4, stddev 201.3 (sigma 0.580) from 1,000 requests")
    assert lines[3].endswith("within 1.1 points of the histogram's (largest at 200)")
    assert lines[4:7] == [
        "          tokens  observed  fitted",
        "            1-20      0.0%    0.1%",
        "           21-50      1.0%    1.2%",
    ]


def test_raw_samples_read_with_resets_and_binned_by_scrape() -> None:
    # A counter reset (a restarted server) counts from zero: 5 + 3 + 2.
    assert series_increase([(0, 10), (1, 15), (2, 3), (3, 5)]) == 10
    # From the first sample in the window, whenever the series began: 4 is what it counted before.
    assert series_increase([(110, 4), (112, 6), (114, 9)]) == 5
    # Two replicas scraped every 5 s, half a second apart: their increases add up interval by interval.
    a = [(100.0, 0.0), (105.0, 4.0), (110.0, 10.0), (115.0, 11.0)]
    b = [(100.5, 7.0), (105.5, 9.0), (110.5, 9.0), (115.5, 12.0)]
    assert _counts_per_interval({(("pod", "a"),): a, (("pod", "b"),): b}) == ([6.0, 6.0, 4.0], 5.0)


def test_selectors_with_or_without_braces() -> None:
    assert normalise_selector('{model_name="m", namespace="prod"}') == 'model_name="m", namespace="prod"'
    assert normalise_selector(' model_name="m" ') == 'model_name="m"'
    assert normalise_selector("") == ""
    with pytest.raises(WorkloadError, match="give label matchers such as"):
        normalise_selector('vllm:x{model_name="m"}')
    # Braces inside a quoted value are the regex's (a quantifier), escaped quotes included.
    assert normalise_selector('pod=~"iris-[a-z0-9]{5}"') == 'pod=~"iris-[a-z0-9]{5}"'
    assert normalise_selector('{a="\\"{", b=~"x{2}"}') == 'a="\\"{", b=~"x{2}"'
    with pytest.raises(WorkloadError, match="give label matchers such as"):
        normalise_selector('a="\\"" } {')
