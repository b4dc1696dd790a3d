"""The Makefile's recipes as a user's shell runs them, for the tests that hold a tutorial's step to a make target
and run it as written."""

from __future__ import annotations

from tests.support.paths import REPO


def make_recipe(target: str) -> list[str]:
    """A Makefile target's commands as written, `$(BIN)` spelled out."""
    lines = (REPO / "Makefile").read_text().splitlines()
    start = lines.index(next(line for line in lines if line.startswith(f"{target}:"))) + 1
    recipe = []
    for line in lines[start:]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip().replace("$(BIN)", ".venv/bin"))
    return recipe
