"""Fixtures shared by the LLM tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.vllm import vllm_installed


@pytest.fixture(scope="session")
def vllm_program() -> Path:
    """The cached `vllm` program. Installed by a fixture, not inside a test: on a cold machine the install (2-5
    minutes) is set-up, not the test's own time against its ceiling (tests/support/tiers.py)."""
    return vllm_installed()
