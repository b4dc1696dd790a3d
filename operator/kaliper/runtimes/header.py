"""`python -m kaliper.runtimes.header RUNTIME PATH`: read a model's header where the model is (the container
the operator starts for a ProfileRun's fit check, with the model mounted as its server's pod would have it).

Prints the ModelShape's JSON and writes it to the container's termination message, which the operator reads
from the pod's status (a few hundred bytes: well within the message's 4,096). A header that cannot be read
exits 1 with the reason there instead."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from kaliper.runtimes import RUNTIMES

TERMINATION_LOG = Path("/dev/termination-log")


def read_header(runtime: str, path: str) -> str:
    """The model's shape as JSON; ValueError with the reason when its runtime cannot read it."""
    try:
        shape = RUNTIMES[runtime].model_shape(path)
    except (OSError, KeyError) as exc:
        raise ValueError(f"{path}: {exc}") from exc
    if shape is None:
        raise ValueError(f"the {runtime} runtime reads no model header")
    return shape.model_dump_json(by_alias=True)


def _say(text: str, termination_log: Path) -> None:
    with contextlib.suppress(OSError):  # not in a container: what was printed is all there is
        termination_log.write_text(text[:4000])


def main(argv: list[str] | None = None, termination_log: Path = TERMINATION_LOG) -> int:
    parser = argparse.ArgumentParser(prog="python -m kaliper.runtimes.header")
    parser.add_argument("runtime", choices=sorted(RUNTIMES))
    parser.add_argument("path")
    args = parser.parse_args(argv)
    try:
        text = read_header(args.runtime, args.path)
    except ValueError as exc:
        _say(str(exc), termination_log)
        print(exc, file=sys.stderr)
        return 1
    _say(text, termination_log)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
