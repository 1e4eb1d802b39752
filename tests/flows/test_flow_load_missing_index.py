"""A flow given an index that is not there is refused when it is loaded (``Flow.load(NAME, index=...)``,
``tessera run --index``), with the error ``Index.open`` gives (it names ``tessera ingest``), not at its first
search: before, the flow loaded and ``run`` failed inside the retrieval step, after the model checks (and, on Ray,
after Ray started)."""

from __future__ import annotations

import pytest

from flows.commands import main
from operators.store.errors import IndexNotFoundError


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.mark.parametrize("given", ["missing/path", "nosuch"])
def test_flow_load_refuses_a_missing_index_as_index_open_does(home, tmp_path, monkeypatch, given):
    from flows.api import Flow, Index

    monkeypatch.chdir(tmp_path)
    with pytest.raises(IndexNotFoundError) as opened:
        Index.open(given)
    with pytest.raises(IndexNotFoundError) as loaded:
        Flow.load("bm25", index=given)
    assert loaded.value.message == opened.value.message and loaded.value.field == "index"  # the argument given
    where = tmp_path / given if "/" in given else home / "indices" / given  # a bare name is $TESSERA_HOME's
    assert f"no index at {where}" in str(loaded.value) and "tessera ingest" in str(loaded.value)


def test_flow_load_refuses_a_folder_that_is_no_index_and_takes_one_that_is(home, tmp_path, bm25_index):
    from flows.api import Flow

    with pytest.raises(IndexNotFoundError, match=f"no index at {tmp_path}: .*manifest.json not found"):
        Flow.load("bm25", index=tmp_path)
    assert Flow.load("bm25", index=str(bm25_index)).run("classical music").table.num_rows > 0


def test_tessera_run_refuses_a_missing_index_before_it_reads_the_queries(home, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    status = main(["run", "bm25", "--index", "missing", "-q", "no/such/queries.jsonl"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith(f"tessera: error: field '--index': no index at {home / 'indices' / 'missing'}")  # not
    # the queries file
    assert "tessera ingest --source FILE --index" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", [["run", "hybrid", "--index", "{index}", "-q", "x"],
                                     ["chat", "--index", "{index}"], ["cache", "explain", "bm25", "--index", "{index}"],
                                     ["index", "info", "{index}"], ["index", "documents", "{index}"],
                                     ["index", "update", "{index}", "{file}"], ["index", "compact", "{index}"]])
def test_a_missing_index_is_named_as_the_argument_that_gave_it(home, tmp_path, capsys, command):
    """``tessera run hybrid --index /no/such/index`` said ``tessera: error: no index at ...`` where every other bad
    argument says ``tessera: error: field '--index': ...``: it names the option (or ``NAME_OR_PATH``) now."""
    (tmp_path / "docs.jsonl").write_text('{"_id": "d1", "text": "Kea are alpine parrots."}\n')
    index = tmp_path / "no" / "such" / "index"
    status = main([part.format(index=index, file=tmp_path / "docs.jsonl") for part in command])
    err = capsys.readouterr().err
    field = "--index" if "--index" in command else "NAME_OR_PATH"
    assert status == 2 and err.startswith(f"tessera: error: field '{field}': no index at {index}: "), err
