"""Fixtures shared by the flow tests."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import pytest


@pytest.fixture
def committed_docnos() -> Callable[[Path], list[str]]:
    """A function: every committed chunk id of an index, sorted, with repeats (so a duplicate shows)."""
    import pyarrow.parquet as pq

    from operators.store import Index

    def docnos(index_path: Path) -> list[str]:
        found = []
        for shard in sorted(Index.open(index_path).finished_shards()):
            table = pq.read_table(index_path / "shards" / shard / "docs.parquet", columns=["docno"])
            found += table.column(0).to_pylist()
        return sorted(found)

    return docnos
