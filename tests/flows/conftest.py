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


@pytest.fixture
def run_cli(monkeypatch, capsys, tmp_path) -> Callable[..., tuple[int, str]]:
    """A function: ``tessera <args>`` in this process, from the repository root, with ``$TESSERA_HOME`` in
    ``tmp_path``; returns the exit status and what it printed."""
    from flows.commands import main

    def run(*args: str) -> tuple[int, str]:
        monkeypatch.chdir(Path(__file__).resolve().parents[2])
        monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
        monkeypatch.setenv("COLUMNS", "160")
        capsys.readouterr()
        status = main(list(args))
        return status, capsys.readouterr().out

    return run
