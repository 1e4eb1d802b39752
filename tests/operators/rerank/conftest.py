"""Fixtures shared by the reranker tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def cross_encoder_path(tmp_path_factory) -> Path:
    """A real CrossEncoder checkpoint on disk: the packaged MiniLM with a seeded, untrained head."""
    from operators.testing import untrained_cross_encoder

    return untrained_cross_encoder(tmp_path_factory.mktemp("models") / "ce")
