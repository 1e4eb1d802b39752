"""Cells run one by one in a real Jupyter kernel (nbclient, as tests/test_notebooks.py runs the notebooks), for the
tests of what a notebook user sees: a cell's stream outputs, its result, its error."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parent.parent.parent


def kernel_of_this_python(name: str, tmp_path: Path, monkeypatch) -> None:
    """A kernel spec ``name`` of this interpreter, found first (a "python3" spec installed elsewhere may be another
    Python), with ``$TESSERA_HOME`` under ``tmp_path`` and one torch/OpenMP thread."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    spec = tmp_path / "jupyter" / "kernels" / name
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": name, "language": "python"}), encoding="utf-8")
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))


def sample_corpus(tmp_path: Path, documents: int) -> Path:
    """The first ``documents`` lines of the sample corpus (data/sample) as ``tmp_path/corpus.jsonl``."""
    corpus = tmp_path / "corpus.jsonl"
    lines = (REPO / "data" / "sample" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:documents]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return corpus


def run_cells(cells: list[str], tmp_path: Path, monkeypatch, *, allow_errors: bool = False) -> nbformat.NotebookNode:
    """A notebook of ``cells`` executed in a kernel of this Python, in ``tmp_path`` with ``$TESSERA_HOME`` under it
    and this checkout first on its path; returned with its outputs."""
    from nbclient import NotebookClient

    monkeypatch.setenv("PYTHONPATH", str(REPO))
    kernel_of_this_python("tessera-cells", tmp_path, monkeypatch)
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    # ipykernel passes what descriptors 1 and 2 get (C++ logs, a subprocess's output) into the cell, as in Jupyter,
    # except under pytest: it looks for PYTEST_CURRENT_TEST, which the kernel would inherit
    env = {name: value for name, value in os.environ.items() if name != "PYTEST_CURRENT_TEST"}
    NotebookClient(book, timeout=300, kernel_name="tessera-cells", allow_errors=allow_errors,
                   resources={"metadata": {"path": str(tmp_path)}}).execute(env=env)
    return book


def streams(cell: nbformat.NotebookNode, name: str = "stderr") -> str:
    """What ``cell`` wrote to ``name``, joined."""
    return "".join(out.get("text", "") for out in cell.outputs if out.get("name") == name)
