"""`python -m kaliper.serving.fetch URL PATH [--sha256 HEX]`: the init container that downloads a model.

A mismatching checksum or a failed download exits non-zero with the reason, so the pod never serves a wrong
or partial model (the ModelDeployment reports the init container's failure)."""

from __future__ import annotations

import argparse
import hashlib
import sys
import urllib.request
from pathlib import Path


def fetch(url: str, target: Path, sha256: str | None = None, timeout: float = 300) -> str:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=timeout) as response, partial.open("wb") as out:
        while chunk := response.read(1 << 20):
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
    except (OSError, ValueError) as exc:
        sys.exit(f"cannot fetch the model: {exc}")


if __name__ == "__main__":
    main()
