"""`python -m kaliper.serving.fetch URL PATH [--sha256 HEX]`: the init container that downloads a model.

A mismatching checksum or a failed download exits non-zero with the reason, so the pod never serves a wrong
or partial model (the ModelDeployment reports the init container's failure)."""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import httpx

# A connection refused or reset before any byte arrived is tried again (a model store restarting, a Service
# whose endpoints are not ready yet); a response with an error status is final.
CONNECT_RETRIES = 3


def fetch(url: str, target: Path, sha256: str | None = None, timeout: float = 300) -> str:
    """Download url to target (through target.partial, renamed once whole and checked); its SHA-256."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    # `timeout` bounds each wait (connect, each read), not the whole download: a large model on a slow link
    # still arrives, a stalled one fails.
    transport = httpx.HTTPTransport(retries=CONNECT_RETRIES)
    with (
        httpx.Client(transport=transport, timeout=timeout, follow_redirects=True) as client,
        client.stream("GET", url) as response,
    ):
        response.raise_for_status()
        with partial.open("wb") as out:
            for chunk in response.iter_bytes(1 << 20):
                digest.update(chunk)
                out.write(chunk)
    if sha256 and digest.hexdigest() != sha256.lower():
        partial.unlink()
        raise ValueError(f"{url}: SHA-256 is {digest.hexdigest()}, expected {sha256}")
    partial.rename(target)
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("url")
    parser.add_argument("path", type=Path)
    parser.add_argument("--sha256")
    args = parser.parse_args()
    try:
        print(f"fetched {args.url} to {args.path} (sha256 {fetch(args.url, args.path, args.sha256)})")
    except (OSError, ValueError, httpx.HTTPError) as exc:
        sys.exit(f"cannot fetch the model: {exc}")


if __name__ == "__main__":
    main()
