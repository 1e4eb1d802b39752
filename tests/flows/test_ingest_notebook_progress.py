"""An ingestion run from a Jupyter notebook shows a progress bar that redraws itself in its cell. The kernel's stderr
is no terminal, so ``ingest`` printed a log's lines into the cell instead: one per committed shard and one every
30 s while a shard is embedded, hundreds over a large corpus (notebooks/README.md promised bars). Now it draws
``tqdm.auto``'s bar there: a widget with ipywidgets, else one line that the notebook rewrites at each carriage
return. A real kernel, a real BM25 ingestion of 30 sample documents in 3 shards."""

from __future__ import annotations

import pytest

from tests.flows.notebook_cells import run_cells, sample_corpus, streams


@pytest.mark.process
def test_ingest_in_a_notebook_draws_a_bar_not_a_line_per_shard(tmp_path, monkeypatch):
    corpus = sample_corpus(tmp_path, 30)
    book = run_cells([
        "from flows.api import ingest",
        f"index = ingest({str(corpus)!r}, {str(tmp_path / 'idx')!r}, settings={{'dense': False}}, shard_size=10)\n"
        "index"], tmp_path, monkeypatch)
    cell = book.cells[1]
    assert "chunks in 3 shard(s); bm25" in cell.outputs[-1]["data"]["text/plain"]
    err = streams(cell)
    assert "committed" not in err, err  # the log's lines: "ingest: shard 1/3 committed, 10/30 docs, ..."
    widgets = [out for out in cell.outputs if "application/vnd.jupyter.widget-view+json" in out.get("data", {})]
    assert widgets or ("\r" in err and "ingest: 100%" in err and "shards=3/3" in err), cell.outputs
