"""``tessera index info`` on an index folder whose manifest.json is lost (its shard folders still there) says so in
one line naming a shard, as ``tessera index add`` refuses such a folder (``layout.lost_manifest``), instead of "not
found; build one with tessera ingest" (which refuses that folder too). A folder without shards is still not found.
``tessera`` runs in-process on a real BM25 index of two documents."""

from __future__ import annotations

import json

from tests.flows.test_cli import assert_one_line_error, tessera_in_process


def test_index_info_names_the_lost_manifest_and_a_shard(tmp_path, monkeypatch, capsys):
    home, index, corpus = tmp_path / "home", tmp_path / "index", tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"_id": "d1", "text": "honey bees"}) + "\n"
                      + json.dumps({"_id": "d2", "text": "opera singers"}) + "\n")
    tessera_in_process(monkeypatch, capsys, "index", "add", str(index), str(corpus), "--no-dense", home=home)
    [shard] = [p.name for p in (index / "shards").iterdir()]
    (index / "manifest.json").unlink()
    proc = tessera_in_process(monkeypatch, capsys, "index", "info", str(index), home=home, check=None)
    line = assert_one_line_error(proc, f"{index} holds 1 shard folder(s) but no manifest.json",
                                 f"shards/{shard}", "restore the manifest")
    assert "not found" not in line and "build one" not in line
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_line_error(tessera_in_process(monkeypatch, capsys, "index", "info", str(empty), home=home, check=None),
                          "manifest.json not found")


def test_index_info_on_a_folder_of_documents_says_to_ingest_it_into_another_index(tmp_path, monkeypatch, capsys):
    """It advised `tessera ingest --source FILE --index DOCS`, which refuses that folder ('a folder of other
    files'): the folder is the source, not the index."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("honey bees")
    (docs / "b.md").write_text("opera singers")
    proc = tessera_in_process(monkeypatch, capsys, "index", "info", str(docs), home=tmp_path / "home", check=None)
    line = assert_one_line_error(proc, f"no index at {docs}: it is a folder of other files (2 entries",
                                 f"tessera ingest --source {docs} --index NAME")
    assert f"--index {docs}`" not in line


def test_a_bare_name_of_an_index_in_the_working_folder_says_to_give_it_as_a_path(tmp_path, monkeypatch, capsys):
    """Ingested as ``--index ./relidx`` and searched as ``--index relidx``: the name was looked up under
    $TESSERA_HOME/indices, and the error advised building an index there."""
    home = tmp_path / "home"
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"_id": "d1", "text": "honey bees"}) + "\n")
    here = {"home": home, "cwd": tmp_path}
    tessera_in_process(monkeypatch, capsys, "index", "add", "./relidx", str(corpus), "--no-dense", **here)
    assert (tmp_path / "relidx" / "manifest.json").is_file()
    proc = tessera_in_process(monkeypatch, capsys, "index", "info", "relidx", check=None, **here)
    line = assert_one_line_error(proc, f"no index at {home / 'indices' / 'relidx'}",
                                 "./relidx here is an index", "give it as ./relidx")
    assert "build one" not in line
    assert tessera_in_process(monkeypatch, capsys, "index", "info", "./relidx", **here).returncode == 0
