"""Where the repository's files are, for tests that read them."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
CATALOGUE = REPO / "tests" / "catalogue" / "invalid"
