"""Fixtures of `kaliper run`'s tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaliper.serving.examples import make_iris


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_iris(tmp_path_factory.mktemp("models") / "iris.onnx")
