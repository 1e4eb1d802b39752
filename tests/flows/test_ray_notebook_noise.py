"""A notebook's Ray run keeps Ray's "constructor arguments in the object store" line out of the cell. A Jupyter
kernel passes what its descriptor 2 gets into the running cell, so Ray's driver-side line for each Ray Data actor
(ray-project/ray#57733, which ``tessera`` drops) showed under the cell in red, saying an actor restart "will fail".
Now the Ray that ``Flow.run(executor="ray")`` starts in a kernel filters it as the command does, every other byte
kept. A real kernel, a real local Ray and a BM25 flow; the line is written as Ray's core worker writes it, to
descriptor 2 (which actors log it varies with Ray Data's planning)."""

from __future__ import annotations

import pytest

from tests.flows.notebook_cells import run_cells, sample_corpus, streams
from tests.flows.test_stderr_filter import NOISE, REAL


@pytest.mark.ray
@pytest.mark.process
def test_ray_s_actor_line_is_kept_out_of_a_notebook_cell(tmp_path, monkeypatch):
    corpus = sample_corpus(tmp_path, 20)
    book = run_cells([
        "from flows.api import Flow, ingest\n"
        f"index = ingest({str(corpus)!r}, {str(tmp_path / 'idx')!r}, settings={{'dense': False}}, progress=False)",
        "result = Flow.load('bm25', index=index).run(['gothic architecture'], executor='ray')\nresult.executor",
        f"import os, time\nos.write(2, {NOISE!r} + {REAL!r})\ntime.sleep(1)  # the kernel's pipe, read by its thread",
        "import ray\nray.shutdown()"], tmp_path, monkeypatch)
    assert book.cells[1].outputs[-1]["data"]["text/plain"] == "'ray'"
    err = streams(book.cells[2])
    assert REAL.decode() in err, book.cells[2].outputs
    assert "constructor arguments" not in err, err
