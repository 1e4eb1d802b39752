"""The Python examples of docs/*.md run as written: each page's ```python blocks in order, in one namespace (as a
reader pastes them into one notebook), in a folder laid out as a clone after ``make demo`` (``data/sample`` and the
ingested ``.tessera/indices/sample``), with a TESSERA_HOME of their own. Sybil collects the blocks. A block that needs
what a test run lacks (the service running, a plugin package of the reader's own, minutes of ingestion) is marked in
its page with ``<!-- skip: next "why" -->`` just above it. README.md's blocks run in tests/test_readme.py, which also
checks what they print."""

from __future__ import annotations

import os
import shutil
import sys
import unittest
from pathlib import Path

import pytest
from sybil import Sybil
from sybil.evaluators.skip import Skipper
from sybil.parsers.markdown import PythonCodeBlockParser, SkipParser

ROOT = Path(__file__).resolve().parent.parent
DOCS = Sybil(parsers=[PythonCodeBlockParser(), SkipParser()])
RAY = {"executors.md", "python.md"}  # their examples run executor="ray": on the session's Ray (make test's Ray run)

# docs/python.md's "Evaluate a result" reads queries.jsonl and qrels.trec from the working folder: the sample's
# queries, judged by the documents they were written from (data/sample/README.md).
QRELS = "q1 0 wv00790 1\nq2 0 wv00100 1\nq3 0 wv00770 1\nq4 0 wv00240 1\n"


def runnable_blocks(page: Path) -> list[int]:
    """The lines of ``page``'s Python blocks that no skip directive precedes."""
    lines, skip_next = [], False
    for example in DOCS.parse(page):
        if isinstance(example.region.evaluator, Skipper):
            skip_next = example.parsed[0] == "next"
        elif not skip_next:
            lines.append(example.line)
        else:
            skip_next = False
    return lines


PAGES = [page for page in sorted((ROOT / "docs").glob("*.md")) if runnable_blocks(page)]


def test_the_docs_show_python_examples():
    assert {"python.md", "operators.md", "caching.md", "llm.md"} <= {page.name for page in PAGES}


@pytest.fixture
def reader_folder(sample_workspace, tmp_path, monkeypatch) -> Path:
    """A clone's folder after ``make demo`` (the sample workspace's data and index, linked), the queries and
    judgements the evaluation example reads; os.environ and sys.path as they were afterwards (the plugin examples set
    TESSERA_OPERATORS)."""
    folder = tmp_path / "clone"
    folder.mkdir()
    for name in ("data", ".tessera"):
        (folder / name).symlink_to(sample_workspace / name)
    shutil.copy(sample_workspace / "data" / "sample" / "queries.jsonl", folder / "queries.jsonl")
    (folder / "qrels.trec").write_text(QRELS, encoding="utf-8")
    monkeypatch.chdir(folder)
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    environ, path = dict(os.environ), list(sys.path)
    yield folder
    for added in set(os.environ) - set(environ):
        del os.environ[added]
    os.environ.update(environ)
    sys.path[:] = path


def pages():
    for page in PAGES:
        marks = [pytest.mark.integration] + ([pytest.mark.ray] if page.name in RAY else [])
        yield pytest.param(page, marks=marks, id=page.name)


@pytest.mark.parametrize("page", list(pages()))
def test_the_python_examples_of_a_page_run_as_written(page, reader_folder, request, capsys):
    if page.name in RAY:
        request.getfixturevalue("ray_session")
    ran, skipped = [], []
    document = DOCS.parse(page)
    for example in document:
        if isinstance(example.region.evaluator, Skipper):
            example.evaluate()  # a skip directive: the next block is skipped
            continue
        try:
            example.evaluate()  # raises what the block raises, its traceback at the page's line
        except unittest.SkipTest as why:
            skipped.append(why)
            continue
        ran.append(example.line)
    assert ran == runnable_blocks(page), f"{page.name}: blocks left unrun ({skipped})"
    CHECKS.get(page.name, lambda namespace, printed: None)(document.namespace, capsys.readouterr().out)


def _python_page(namespace: dict, printed: str) -> None:
    """What docs/python.md's comments say its examples give."""
    assert "None queries query 2 of 2 is empty: give the text to search for" in printed  # the Errors example
    assert namespace["counted"].column("word_count").to_pylist() == [2]
    assert str(namespace["scores"]) and min(namespace["scores"].values()) > 0  # the sample's queries find theirs


CHECKS = {"python.md": _python_page}
