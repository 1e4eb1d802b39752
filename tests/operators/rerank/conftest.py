"""Fixtures shared by the reranker tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def cross_encoder_path(untrained_ce) -> Path:
    """A real CrossEncoder checkpoint on disk: the packaged MiniLM with a seeded, untrained head (the session's)."""
    return untrained_ce
