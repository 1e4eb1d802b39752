"""Fixtures of the model tests."""

from __future__ import annotations

import pytest

from operators.models.onnx_query_encoder import ENV


@pytest.fixture
def export_home(tmp_path, monkeypatch):
    """A ``TESSERA_HOME`` of the test's own, where ONNX exports go, and the query encoder's backend left to choose."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    monkeypatch.delenv(ENV, raising=False)
    return tmp_path
