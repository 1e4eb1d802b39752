"""Shared fixtures: the evaluation data beside the repo, a fresh step cache."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``; tests that need it skip with the reason when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"../shared/data not present at {SHARED_DATA}: evaluation data is not on this machine")
    return SHARED_DATA


@pytest.fixture
def cache(tmp_path):
    from flows.cache import StepCache

    return StepCache(tmp_path / "cache")
