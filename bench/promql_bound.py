"""How long the operator takes to check a run's PromQL (kaliper.metrics.promql_scope.QueryScope.confine): the worst
shapes a run may write under the bound of MAX_TERMS terms, beside the same shapes past it checked without the
bound (what a tenant could make the operator do before it), and a dashboard-like query for scale.

    .venv/bin/python bench/promql_bound.py [--repeat 5]

Prints, per shape, its terms and characters and the best of `--repeat` checks in milliseconds; then the worst
admitted check against the dashboard query as a ratio.
"""

from __future__ import annotations

import argparse
import time
from unittest import mock

from kaliper.metrics import promql_scope
from kaliper.metrics.promql_scope import QueryRefused, QueryScope, terms

SCOPE = QueryScope("team-a")
DASHBOARD = (
    'sum by (pod) (rate(container_cpu_usage_seconds_total{container!="",pod=~"scorer-.+"}[5m])) / '
    'sum by (pod) (kube_pod_container_resource_requests{resource="cpu",pod=~"scorer-.+"})'
)


def shapes(size: int) -> dict[str, str]:
    """The shapes whose check grows fastest with their size, each about `size` terms."""
    return {
        "selectors joined by +": "+".join(["up"] * (size // 2)),
        "nested brackets": "(" * (size // 2 - 1) + "up" + ")" * (size // 2 - 1),
        "nested functions": "abs(" * (size // 3) + "up" + ")" * (size // 3),
        "selectors with matchers": "+".join(['up{a="b",c=~"d.+",e!="f"}'] * (size // 3)),
    }


def best_ms(promql: str, repeat: int) -> tuple[float, str]:
    best, outcome = float("inf"), ""
    for _ in range(repeat):
        start = time.perf_counter()
        try:
            SCOPE.confine(promql)
            outcome = "checked"
        except QueryRefused as refused:
            outcome = "refused: " + str(refused)[:40]
        best = min(best, time.perf_counter() - start)
    return best * 1000, outcome


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    bound = promql_scope.MAX_TERMS
    dashboard_ms, _ = best_ms(DASHBOARD, args.repeat)
    print(f"dashboard query: {terms(DASHBOARD)} terms, {dashboard_ms:.2f} ms")
    worst = 0.0
    print(f"\nat the bound ({bound} terms):")
    for name, promql in shapes(bound).items():
        ms, outcome = best_ms(promql, args.repeat)
        worst = max(worst, ms)
        print(f"  {name:26} {terms(promql):5} terms {len(promql):5} chars {ms:9.2f} ms  {outcome}")
    print(f"\npast it, refused with the bound, then checked without it (once: {2 * bound} terms):")
    for name, promql in shapes(2 * bound).items():
        refused_ms, outcome = best_ms(promql, args.repeat)
        with mock.patch.object(promql_scope, "MAX_TERMS", 10**9):
            unbounded_ms, _ = best_ms(promql, 1)
        print(f"  {name:26} {terms(promql):5} terms: {refused_ms:.3f} ms refused; unbounded {unbounded_ms:9.1f} ms")
    print(f"\nworst admitted check: {worst:.1f} ms, {worst / dashboard_ms:.0f}x the dashboard query")


if __name__ == "__main__":
    main()
