"""Paths written as Windows writes them (``C:\\Users\\...``), copied from a Windows machine into a command or a spec:
on this machine they name no file, and each is a clear error saying so, not a query's text or a "relative" path."""

from __future__ import annotations

import pytest

from flows.ingestion.errors import IngestError
from flows.queries import read_queries
from operators.errors import SpecError

WINDOWS = "a Windows path, which names no file on this machine: give its path here, such as /mnt/c/... for C: in WSL"


@pytest.mark.parametrize("given", ["C:\\data\\scifact", "C:\\Users\\me\\My Documents\\queries.tsv",
                                   "\\\\fileserver\\share\\q.jsonl", ".\\queries.jsonl"])
def test_a_windows_path_given_as_the_queries_is_refused_as_a_file_not_found_here(given, tmp_path, monkeypatch):
    """'C:\\data\\scifact' (no suffix) and a path with a space were searched for as one query's text, with results
    (the folder's name matched SciFact's documents) and at most a note."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError) as err:
        read_queries(given)
    assert err.value.message == f"queries file not found: {given}, {WINDOWS}"


def test_a_windows_path_as_the_source_or_in_a_spec_is_refused_naming_it(tmp_path, monkeypatch):
    """The spec's path was said to be 'relative to the working directory', which a drive letter is not."""
    from flows.ingestion import ingest

    monkeypatch.chdir(tmp_path)
    with pytest.raises(IngestError) as err:
        ingest("C:\\Users\\me\\Documents\\export.csv", tmp_path / "idx", settings={"dense": False}, executor="local",
               progress=False)
    assert err.value.message == ("cannot read source='C:\\Users\\me\\Documents\\export.csv': no such file or folder, "
                                 f"{WINDOWS}")
    spec = {"name": "mine", "steps": {"read": {"op": "sources.csv",
                                               "params": {"path": "C:\\Users\\me\\Documents\\export.csv"}}}}
    with pytest.raises(IngestError) as err:
        ingest(None, tmp_path / "idx", spec=spec, settings={"dense": False}, executor="local", progress=False)
    assert err.value.message == ("no source= was given, so the spec 'mine' reads its own path "
                                 f"C:\\Users\\me\\Documents\\export.csv, {WINDOWS} (in the spec), or give source=FILE")


def test_a_windows_path_as_the_index_is_refused_and_makes_no_folder_of_that_name(tmp_path, monkeypatch, capsys):
    """'--index C:\\Users\\me\\idx' has no '/', so it was an index name: tessera ingest made a folder named
    'C:\\Users\\me\\idx' in $TESSERA_HOME/indices, and tessera run looked for one there."""
    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    (tmp_path / "notes.txt").write_text("Podocytes are motile and migrate in the presence of injury.\r\n")
    assert main(["ingest", "--source", str(tmp_path / "notes.txt"), "--index", "C:\\Users\\me\\idx", "--no-dense",
                 "--quiet"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"tessera: error: field '--index': the index 'C:\\Users\\me\\idx' is {WINDOWS}, or a name of letters, digits, "
        "'_', '.' or '-'")
    assert not (tmp_path / "home" / "indices").exists() or not list((tmp_path / "home" / "indices").iterdir())
    assert main(["run", "bm25", "--index", "C:\\Users\\me\\idx", "-q", "podocytes", "--quiet"]) == 2
    assert f"the index 'C:\\Users\\me\\idx' is {WINDOWS}" in capsys.readouterr().err
