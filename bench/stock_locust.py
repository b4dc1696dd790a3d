"""Stock Locust (FastHttpUser, its own statistics) as a peer for the benchmarks.

    python bench/stock_locust.py URL --users N --warmup S --duration S [--method POST --body JSON]

Prints one JSON line: Locust's own percentiles (ms), request count, requests per second, and the wall-clock
interval its statistics cover.
"""

from __future__ import annotations

import argparse
import json
import time
from urllib.parse import urlsplit

import gevent
import locust  # noqa: F401  (monkey-patches for gevent first)
from locust import FastHttpUser, constant, task
from locust.env import Environment


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--users", type=int, required=True)
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--method", default="GET")
    parser.add_argument("--body", default="")
    args = parser.parse_args()
    url = urlsplit(args.url)

    class StockUser(FastHttpUser):
        host = f"{url.scheme}://{url.netloc}"
        wait_time = constant(0)

        @task
        def send(self) -> None:
            if args.method == "GET":
                self.client.get(url.path or "/")
            else:
                self.client.request(
                    args.method, url.path or "/", data=args.body, headers={"Content-Type": "application/json"}
                )

    env = Environment(user_classes=[StockUser])
    runner = env.create_local_runner()
    runner.start(args.users, spawn_rate=args.users)
    gevent.sleep(args.warmup)
    env.stats.reset_all()
    start = time.time()
    gevent.sleep(args.duration)
    end = time.time()
    total = env.stats.total
    figures = {
        "requests": total.num_requests,
        "failures": total.num_failures,
        "rps": total.num_requests / (end - start),
        "percentiles_ms": {f"{p:g}": total.get_response_time_percentile(p / 100) for p in (50, 90, 95, 99, 99.9)},
        "interval": [start, end],
    }
    runner.quit()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
