"""A document id differs from what a Windows or macOS user types only in case (``A.TXT`` for the file ``a.txt``,
which their file systems take as one name): a delete of it names the id the index holds, through the CLI and the
Python API, on a real folder of SciFact abstracts ingested (BM25 only)."""

from __future__ import annotations

import json

import pytest

from flows.commands import main
from flows.ingestion import ingest

pytestmark = pytest.mark.data


@pytest.fixture
def folder_index(tmp_path, shared_data):
    """``Notes.txt`` and ``notes.txt`` (two files on Linux, one name on Windows) and ``abstract.txt``, ingested."""
    with open(shared_data / "scifact" / "corpus.jsonl", encoding="utf-8") as f:
        docs = [json.loads(line) for line, _ in zip(f, range(3))]
    folder = tmp_path / "files"
    folder.mkdir()
    for name, doc in zip(("Notes.txt", "notes.txt", "abstract.txt"), docs):
        (folder / name).write_bytes((doc["title"] + "\r\n\r\n" + doc["text"] + "\r\n").encode("utf-8"))
    ingest(folder, tmp_path / "idx", settings={"dense": False}, executor="local", progress=False)
    return tmp_path / "idx"


def test_a_delete_of_an_id_in_another_case_names_the_ids_the_index_holds(folder_index, capsys):
    """It said only "no live chunk has doc id 'ABSTRACT.TXT'"."""
    assert main(["index", "delete", str(folder_index), "--doc-id", "ABSTRACT.TXT"]) == 2
    assert capsys.readouterr().err.strip() == (
        "tessera: error: field '--doc-id': no live chunk has doc id 'ABSTRACT.TXT', so nothing was deleted (ids are "
        "case-sensitive: the index holds 'abstract.txt' for 'ABSTRACT.TXT')")
    assert main(["index", "delete", str(folder_index), "--doc-id", "NOTES.txt"]) == 2
    assert capsys.readouterr().err.strip().endswith("(ids are case-sensitive: the index holds 'Notes.txt', "
                                                    "'notes.txt' for 'NOTES.txt')")
    assert main(["index", "delete", str(folder_index), "--doc-id", "abstract.txt"]) == 0  # as it says


def test_the_python_api_delete_names_them_too(folder_index):
    from flows.api import Index
    from operators.store.errors import CommitError

    with pytest.raises(CommitError) as err:
        Index.open(folder_index).delete(["Abstract.TXT"])
    assert err.value.message.endswith("so nothing was deleted (ids are case-sensitive: the index holds "
                                      "'abstract.txt' for 'Abstract.TXT')"), err.value.message
