"""Fixtures shared by the vector-store retriever tests."""

from __future__ import annotations

import pyarrow as pa
import pytest

#: Documents loaded into the Chroma and Qdrant test collections.
N_STORE_DOCS = 300


@pytest.fixture(scope="session")
def docs() -> pa.Table:
    """The first 300 sample documents with a made-up ``bucket`` metadata field (0, 1, 2), embedded with
    MiniLM (title + text) once per session."""
    from operators.registry import create
    from operators.testing import sample_documents

    table = sample_documents(N_STORE_DOCS)
    table = table.append_column("bucket", pa.array([i % 3 for i in range(table.num_rows)], pa.int64()))
    return create("embed", {"title_column": "title"})(table)
