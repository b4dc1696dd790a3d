"""Where the repository's files are, for tests that read them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
CATALOGUE = REPO / "tests" / "catalogue" / "invalid"
MINIMAL = REPO / "tests" / "catalogue" / "minimal"
KALIPER = Path(sys.executable).with_name("kaliper")  # the CLI of the environment running the tests
CACHE = Path(os.environ.get("KALIPER_CACHE", Path.home() / ".cache" / "kaliper"))  # builds kept between runs
