"""An ingestion into a folder that holds other files and no index is refused before anything is read, naming the
folder and what is in it: before, the index (manifest.json, shards/, _ingest/, .lock) was written among them
without a word. An empty folder gets a new index and an existing index is resumed, as before."""

from __future__ import annotations

import json

import pytest

from flows.commands import main
from flows.ingestion.errors import IngestError


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    """Five of the bundled sample's documents as a JSONL corpus; ``$TESSERA_HOME`` in ``tmp_path``."""
    from operators.testing import sample_documents

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"_id": d["docno"], "title": d["title"], "text": d["text"]}) + "\n"
                            for d in sample_documents(5).to_pylist()), encoding="utf-8")
    return path


@pytest.fixture
def someones_folder(tmp_path):
    folder = tmp_path / "some" / "folder"
    (folder / "photos").mkdir(parents=True)
    (folder / "notes.txt").write_text("mine\n")
    return folder


def test_ingest_refuses_a_folder_of_other_files_and_writes_nothing_there(corpus, someones_folder):
    from flows.api import ingest

    with pytest.raises(IngestError) as refused:
        ingest(corpus, someones_folder, settings={"dense": False}, progress=False)
    assert refused.value.field == "index"
    assert f"{someones_folder} is a folder of other files, not an index (2 entries: notes.txt, photos)" \
        in refused.value.message
    assert sorted(p.name for p in someones_folder.iterdir()) == ["notes.txt", "photos"]


def test_tessera_ingest_refuses_it_in_one_line(corpus, someones_folder, capsys):
    status = main(["ingest", "--source", str(corpus), "--index", str(someones_folder), "--no-dense",
                   "--executor", "local"])
    err = capsys.readouterr().err
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert f"{someones_folder} is a folder of other files" in err and "notes.txt, photos" in err
    assert sorted(p.name for p in someones_folder.iterdir()) == ["notes.txt", "photos"]


def test_an_empty_folder_gets_an_index_and_an_index_is_resumed(corpus, tmp_path):
    from flows.api import ingest

    folder = tmp_path / "empty"
    folder.mkdir()
    first = ingest(corpus, folder, settings={"dense": False}, progress=False)
    again = ingest(corpus, folder, settings={"dense": False}, progress=False)  # a folder with an index in it
    assert len(first) == len(again) == 5 and (folder / "manifest.json").is_file()


def test_tessera_index_add_refuses_it_as_ingest_does(corpus, someones_folder, capsys):
    """``tessera index add`` wrote manifest.json, shards/ and .lock among the folder's files (exit 0)."""
    status = main(["index", "add", str(someones_folder), str(corpus), "--no-dense"])
    err = capsys.readouterr().err
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert f"{someones_folder} is a folder of other files, not an index (2 entries: notes.txt, photos)" in err
    assert sorted(p.name for p in someones_folder.iterdir()) == ["notes.txt", "photos"]


def test_a_first_manifest_being_written_is_the_index_own_file(tmp_path):
    """The first ingestion writes ``manifest.json`` under a temporary sibling's name, then renames it: for that moment
    the folder held, to this check, a foreign file, and an upload to the service then was a 422 "a folder of other
    files" instead of the 409 of an ingestion running. Only a sibling of an index's own file is the index's."""
    from operators.atomic import replacing
    from operators.store.layout import foreign_entries

    folder = tmp_path / "index"
    (folder / "_ingest").mkdir(parents=True)
    with replacing(folder / "manifest.json") as writing:
        writing.write_text("{}")
        assert foreign_entries(folder) == []
        (folder / ".notes.txt.4242.0123abcd.tmp").write_text("someone's editor")
        assert foreign_entries(folder) == [".notes.txt.4242.0123abcd.tmp"]
