"""The Makefile's demos make the models their examples read: `make demo`, `make demo-llm` and `make demo-vllm`
each make only the example models their manifest names (one model each), so a recipe that makes another
model than its example reads fails here rather than on a user's machine."""

from __future__ import annotations

import re
import shlex

from tests.support.as_written import make_recipe
from tests.support.paths import REPO


def made_and_read(target: str) -> tuple[list[str], set[str]]:
    """The models the recipe makes (its --only values) and those its example manifest reads."""
    made, example = [], None
    for words in map(shlex.split, make_recipe(target)):
        if "make-example-models" in words:
            made = [words[i + 1] for i, word in enumerate(words) if word == "--only"]
        elif words[1:2] == ["run"]:
            example = REPO / words[2]
    assert example is not None, make_recipe(target)
    # `models/x` beside examples/local's manifests, `../local/models/x` from examples/llm's
    read = set(re.findall(r"(?<![\w/.])(?:\.\./local/)?models/([\w.-]+)", example.read_text()))
    return made, read


def test_each_demo_makes_the_one_model_its_example_reads() -> None:
    assert {t: made_and_read(t) for t in ("demo", "demo-llm", "demo-vllm")} == {
        "demo": (["iris.onnx"], {"iris.onnx"}),
        "demo-llm": (["small-llm"], {"small-llm"}),
        "demo-vllm": (["chat-hf"], {"chat-hf"}),
    }
