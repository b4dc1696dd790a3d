"""Capacity: requests per second per load-generator core, as a ratio to wrk on the same core.

nginx (Debian, one worker, pinned to CPU 1) serves a trivial endpoint. On CPU 0, in turn: wrk (Debian,
1 thread), Kaliper's generator (closed loop, HDR recording on, one process) and stock Locust (FastHttpUser),
each with the same number of connections. Then scaling: Kaliper and wrk on both CPUs (nginx shares CPU 1).

    .venv/bin/python bench/capacity.py [--connections 32] [--duration 10]

Goal: at least 0.2x wrk per core.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

from _common import run_kaliper, run_stock_locust, wait_http

NGINX_CONF = """
worker_processes {workers};
daemon off;
pid {root}/nginx.pid;
error_log {root}/error.log;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 100000;
  client_body_temp_path {root};
  server {{
    listen 127.0.0.1:{port};
    location / {{ return 200 "ok"; }}
  }}
}}
"""


def require(tool: str) -> str:
    path = shutil.which(tool) or (f"/usr/sbin/{tool}" if Path(f"/usr/sbin/{tool}").exists() else None)
    if path is None:
        raise SystemExit(f"{tool} is not installed: apt-get install -y nginx-light wrk")
    return path


@contextmanager
def nginx(port: int, cpus: str, workers: int = 1):  # type: ignore[no-untyped-def]
    with tempfile.TemporaryDirectory() as root:
        conf = Path(root) / "nginx.conf"
        conf.write_text(NGINX_CONF.format(root=root, port=port, workers=workers))
        process = subprocess.Popen(["taskset", "-c", cpus, require("nginx"), "-c", str(conf)])
        try:
            wait_http(f"http://127.0.0.1:{port}/")
            yield f"http://127.0.0.1:{port}"
        finally:
            process.terminate()
            process.wait()


def wrk(url: str, connections: int, duration: int, cpus: str, threads: int = 1) -> float:
    out = subprocess.run(
        ["taskset", "-c", cpus, require("wrk"), f"-t{threads}", f"-c{connections}", f"-d{duration}s", url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]


def kaliper(url: str, connections: int, duration: int, cpus: str, processes: int = 1) -> float:
    config = {
        "url": url,
        "request": {"protocol": "http-json", "method": "GET", "path": "/"},
        "payload": {"inline": ""},
        "load": {
            "closedLoop": {"concurrency": connections},
            "warmup": "2s",
            "processes": processes,
            "minDuration": f"{duration}s",
            "maxDuration": f"{duration}s",
            "stopping": {"window": "1s"},
        },
    }
    return run_kaliper(config, cpus=cpus)["stages"][0]["throughputRps"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--port", type=int, default=18092)
    args = parser.parse_args()
    c, d = args.connections, args.duration

    with nginx(args.port, "1") as url:
        wrk_one = wrk(url, c, d, "0")
        kaliper_one = kaliper(url, c, d, "0")
        locust_one = run_stock_locust(url + "/", c, 2, d, cpus="0")["rps"]
    with nginx(args.port, "0,1", workers=2) as url:
        wrk_two = wrk(url, c * 2, d, "0,1", threads=2)
        kaliper_two = kaliper(url, c, d, "0,1", processes=2)

    print(f"# Capacity: trivial nginx endpoint, {c} connections per generator process, {d} s\n")
    print("| generator | CPUs | requests/s | ratio to wrk |")
    print("|---|---|---|---|")
    print(f"| wrk -t1 | 1 (nginx on the other) | {wrk_one:,.0f} | 1.00 |")
    print(f"| Kaliper, 1 process, HDR on | 1 (nginx on the other) | {kaliper_one:,.0f} | {kaliper_one / wrk_one:.3f} |")
    print(f"| stock Locust FastHttpUser | 1 (nginx on the other) | {locust_one:,.0f} | {locust_one / wrk_one:.3f} |")
    print(f"| wrk -t2 | 2 (shared with nginx) | {wrk_two:,.0f} | 1.00 |")
    print(f"| Kaliper, 2 processes | 2 (shared with nginx) | {kaliper_two:,.0f} | {kaliper_two / wrk_two:.3f} |")
    print(f"\nKaliper scaling, 2 processes / 1 process: {kaliper_two / kaliper_one:.2f}x")


if __name__ == "__main__":
    main()
