"""The notebooks under notebooks/, executed as Jupyter runs them (nbclient, a real kernel, in their own folder),
and committed without outputs. Each writes only under ``$TESSERA_NOTEBOOK_DIR``, a temporary folder here."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from tests.flows.notebook_cells import kernel_of_this_python

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = REPO / "notebooks"


def run_notebook(name: str, tmp_path: Path, monkeypatch) -> nbformat.NotebookNode:
    """Execute ``notebooks/NAME.ipynb`` in a kernel of this Python, with its writes (and $TESSERA_HOME) under
    ``tmp_path``; a cell that raises fails the test with the cell and its traceback."""
    from nbclient import NotebookClient

    monkeypatch.setenv("TESSERA_NOTEBOOK_DIR", str(tmp_path / "work"))
    kernel_of_this_python("tessera-test", tmp_path, monkeypatch)
    before = sorted(p.name for p in NOTEBOOKS.iterdir())
    book = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    NotebookClient(book, timeout=300, kernel_name="tessera-test",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    assert sorted(p.name for p in NOTEBOOKS.iterdir()) == before, "the notebook wrote into notebooks/"
    assert (tmp_path / "work" / name).is_dir()
    return book


def text_of(book: nbformat.NotebookNode) -> str:
    parts = []
    for cell in book.cells:
        for out in cell.get("outputs", []):
            parts.append(out.get("text", "") + str(out.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


def dirty_cells(book: nbformat.NotebookNode) -> list[int]:
    """The code cells that carry outputs or an execution count."""
    return [i for i, c in enumerate(book.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]


def test_committed_notebooks_have_no_outputs():
    books = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert {b.stem for b in books} == {"quickstart", "benchmarking", "rag"}
    for path in books:
        book = nbformat.read(path, as_version=4)
        nbformat.validate(book)
        assert dirty_cells(book) == [], f"{path.name}: cells {dirty_cells(book)} have outputs; clear them"


def test_a_notebook_with_outputs_is_caught():
    book = nbformat.read(NOTEBOOKS / "quickstart.ipynb", as_version=4)
    code = next(i for i, c in enumerate(book.cells) if c.cell_type == "code")
    book.cells[code].outputs = [nbformat.v4.new_output("stream", text="left over")]
    assert dirty_cells(book) == [code]
    book.cells[code].outputs, book.cells[code].execution_count = [], 3
    assert dirty_cells(book) == [code]


@pytest.mark.integration
def test_quickstart(tmp_path, monkeypatch):
    book = run_notebook("quickstart", tmp_path, monkeypatch)
    out = text_of(book)
    assert "chunks in 3 shard(s); bm25)" in out and "cache hits on the second run: 1.0" in out


@pytest.mark.data
def test_benchmarking(shared_data, tmp_path, monkeypatch):
    """A fresh kernel imports the benchmarker (scipy, statsmodels, matplotlib), builds two indices and draws two
    plots: about 6 s on 2 idle cores (docs/results.md, "Notebooks")."""
    monkeypatch.setenv("TESSERA_BENCH_DATASET", str(shared_data / "scifact"))
    book = run_notebook("benchmarking", tmp_path, monkeypatch)
    # the prose's slice: the first 1,000 abstracts and the 24 relevant ones beyond them
    assert "30 queries, 36 judgements, 1024 documents" in text_of(book)
    plots = [o for c in book.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(plots) == 2  # the measures with their intervals, the per-query deltas against bm25


@pytest.mark.integration
@pytest.mark.long
def test_rag(tmp_path, monkeypatch):
    """Embeds 120 documents with MiniLM and generates two answers with SmolLM2: the dearest notebook, about 40 s on
    2 idle cores, run on every make test as the notebooks promise (docs/results.md, "Notebooks")."""
    out = text_of(run_notebook("rag", tmp_path, monkeypatch))
    assert out.count("Q: ") == 2 and out.count("A: ") == 2
    # where each answer's sources came from, as the prose explains (a 135M model often cites nothing)
    assert out.count("   sources from: ") == 2
    assert re.search(r"   sources from: (citations|span|overlap|none)\n", out)
    # the context as the model read it, and which of the 5 passages fit in its 256 tokens
    assert "[Document 1] " in out and "context_index" in out and "reference" in out
    assert "searched for: where do they live? (which insects make honey and pollinate flowers?; " in out
