"""``tessera ingest`` of a source that lost records or files under finished shards, or was read from another path
since. A source that ended before its last finished shard was accepted (``0 docs (1 already done)``), the shard
dropped from ``state.json``, and the documents appended afterwards were counted as that shard's and never ingested;
a glob of a folder refused once (a file edited) was refused for good once restored; and a changed file was not
always named. Real files and real ingests (local executor, BM25 only: no model loads), the command run in-process
as a user runs it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from flows.ingestion.pending import unfinished
from tests.flows.test_ingest_folder_grows import doc_ids, ingest  # the command in-process, and the ids it holds


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def jsonl(path: Path, *ids: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"_id": i, "text": f"{i} about newts"}) + "\n" for i in ids))
    return path


@pytest.fixture
def docs(tmp_path) -> Path:
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.txt").write_text("alpha about cats\n")
    (folder / "b.txt").write_text("beta about dogs\n")
    (folder / "sub" / "c.txt").write_text("gamma about eels\n")
    return folder


def test_records_removed_from_the_end_are_refused_and_records_appended_later_go_in(tmp_path, capsys):
    source, index = jsonl(tmp_path / "h.jsonl", "h1", "h2", "h3"), tmp_path / "idx"
    assert ingest(capsys, source, index) == (0, "3", "0")  # shards: h1 h2 | h3
    jsonl(source, "h1", "h2")
    status, _, err = ingest(capsys, source, index)
    assert status == 2 and "-00001 (documents 2 to 2) is in the index, but the source now ends before it" in err, err
    assert f"changed: {source}" in err
    jsonl(source, "h1", "h2", "h4", "h5")  # appended to the shortened source: h3 is still missing
    status, _, err = ingest(capsys, source, index)
    assert status == 2 and "-00001 (documents 2 to 2) is in the index, but the source now yields other" in err, err
    jsonl(source, "h1", "h2", "h3", "h4", "h5")
    assert ingest(capsys, source, index) == (0, "2", "2")
    assert doc_ids(index) == ["h1", "h2", "h3", "h4", "h5"]


def test_a_file_removed_from_a_folder_under_a_continuation_shard_is_refused_and_files_added_later_go_in(
        tmp_path, docs, capsys):
    index = tmp_path / "idx"
    assert ingest(capsys, docs, index) == (0, "2", "0")
    (docs / "c.txt").write_text("gamma about eels\n")
    assert ingest(capsys, docs, index) == (0, "1", "1")  # shard 1, partial
    (docs / "d.txt").write_text("delta about moths\n")
    assert ingest(capsys, docs, index) == (0, "1", "2")  # shard 1's continuation, 00001.1
    (docs / "d.txt").unlink()
    status, _, err = ingest(capsys, docs, index)
    assert status == 2 and "-00001.1 (documents 3 to 3) is in the index, but the source now ends" in err, err
    assert f"removed: {docs / 'd.txt'}" in err
    (docs / "d.txt").write_text("delta about moths\n")
    (docs / "e.txt").write_text("epsilon about voles\n")
    assert ingest(capsys, docs, index) == (0, "1", "3")
    assert doc_ids(index) == ["a.txt", "b.txt", "c.txt", "d.txt", "e.txt"]


@pytest.mark.parametrize("damage", ["deleted", "shard dropped"])
def test_a_finished_shard_the_state_does_not_record_keeps_its_own_documents_only(tmp_path, capsys, damage):
    """state.json deleted (as a damaged one is), or written by a release that dropped the shard: the documents
    appended to its slice since were counted as its own and never ingested."""
    source, index = jsonl(tmp_path / "h.jsonl", "h1", "h2", "h3"), tmp_path / "idx"
    assert ingest(capsys, source, index) == (0, "3", "0")
    [state] = (index / "_ingest").glob("*/state.json")
    if damage == "deleted":
        state.unlink()
    else:
        recorded = json.loads(state.read_text())
        recorded["shards"] = [s for s in recorded["shards"] if not s["id"].endswith("-00001")]
        state.write_text(json.dumps(recorded))
    jsonl(source, "h1", "h2", "h3", "h4")
    assert ingest(capsys, source, index) == (0, "1", "2")
    assert doc_ids(index) == ["h1", "h2", "h3", "h4"]
    jsonl(source, "h1", "h2", "h9", "h4")  # the shard's own document edited away: refused, as with its record
    status, _, err = ingest(capsys, source, index)
    assert status == 2 and "-00001 (documents 2 to 2)" in err and "other documents" in err, err


def test_a_glob_of_a_folder_with_a_file_changed_names_it_and_goes_on_once_restored(tmp_path, docs, capsys):
    index, glob = tmp_path / "idx", f"{docs}/**/*"
    assert ingest(capsys, docs, index) == (0, "2", "0")
    assert ingest(capsys, glob, index) == (0, "1", "1")  # the folder's source, its subfolder appended
    kept = (docs / "a.txt").read_bytes()
    (docs / "a.txt").write_text("changed\n")
    status, _, err = ingest(capsys, glob, index)
    assert status == 2 and f"changed: {docs / 'a.txt'}" in err and "already live" not in err, err
    (docs / "a.txt").write_bytes(kept)
    assert ingest(capsys, glob, index) == (0, "0", "2")
    assert unfinished(index) == []
    assert doc_ids(index) == ["a.txt", "b.txt", "sub/c.txt"]


def test_a_copied_file_refused_once_goes_on_once_restored(tmp_path, capsys):
    original, index = jsonl(tmp_path / "j.jsonl", "j1", "j2", "j3"), tmp_path / "idx"
    assert ingest(capsys, original, index) == (0, "3", "0")
    copy = jsonl(tmp_path / "copy" / "j.jsonl", "j1", "j2x", "j3")  # copied and edited: refused
    assert ingest(capsys, copy, index)[0] == 2
    shutil.copyfile(original, copy)
    assert ingest(capsys, copy, index) == (0, "0", "2")
    jsonl(copy, "j1", "j2", "j3", "j4")
    assert ingest(capsys, copy, index) == (0, "1", "2")
    assert unfinished(index) == [] and len(list((index / "_ingest").glob("*/state.json"))) == 1
    assert doc_ids(index) == ["j1", "j2", "j3", "j4"]


def test_the_folder_after_its_glob_names_the_file_changed_since(tmp_path, docs, capsys):
    index = tmp_path / "idx"
    assert ingest(capsys, docs, index)[0] == 0
    assert ingest(capsys, f"{docs}/**/*", index)[0] == 0  # state.json now records the glob's path
    (docs / "a.txt").write_text("changed\n")
    status, _, err = ingest(capsys, docs, index)
    assert status == 2 and "-00000 (documents 0 to 1)" in err and f"changed: {docs / 'a.txt'}" in err, err
    assert f"no longer read: {docs / 'sub' / 'c.txt'}" in err and "removed:" not in err


def test_a_subfolder_then_a_glob_of_its_parent_is_refused_naming_both_folders(tmp_path, docs, capsys):
    """The glob was taken for the subfolder's source (it reads every file the subfolder read) and refused, naming
    the subfolder's files as removed at paths that never were (docs/c.txt); with --replace its documents went in
    again under their other names (sub/c.txt beside c.txt). A glob of the subfolder is still its source."""
    index = tmp_path / "idx"
    assert ingest(capsys, docs / "sub", index) == (0, "1", "0")
    for replace in ((), ("--replace",)):
        status, _, err = ingest(capsys, f"{docs}/**/*", index, *replace)
        assert status == 2 and "removed:" not in err, err
        assert f"named from {docs / 'sub'} ('c.txt')" in err and f"names them from {docs} ('sub/c.txt')" in err, err
        assert "would be in the index twice" in err
    assert doc_ids(index) == ["c.txt"]
    assert ingest(capsys, f"{docs}/*.txt", index) == (0, "2", "0")  # the other files, as the message says
    assert ingest(capsys, f"{docs}/sub/*", index) == (0, "0", "1")
    assert doc_ids(index) == ["a.txt", "b.txt", "c.txt"]


def test_the_file_a_longer_copy_continued_is_told_to_ingest_the_copy_not_to_sync(tmp_path, capsys):
    """A longer file that starts with an ingested file's documents continues its source (``moved``). The shorter
    file ingested again was refused advising ``--sync``, which would have deleted the documents only the longer
    file gave."""
    short, index = jsonl(tmp_path / "short.jsonl", "k1", "k2"), tmp_path / "idx"
    assert ingest(capsys, short, index) == (0, "2", "0")
    longer = jsonl(tmp_path / "longer.jsonl", "k1", "k2", "k3")
    assert ingest(capsys, longer, index) == (0, "1", "1")
    status, _, err = ingest(capsys, short, index)
    assert status == 2 and f"the index follows {longer}" in err and f"ingest {longer} to add" in err, err
    assert "a sync here would delete the documents only" in err and "--sync to make the index follow" not in err
    assert doc_ids(index) == ["k1", "k2", "k3"]


def test_a_resume_without_its_staging_state_says_to_give_the_first_runs_shard_size(tmp_path, capsys):
    """``state.json`` records the shard size; deleted (as a damaged one's message advises), a run at another size read
    the committed shards as ranges the source no longer holds and blamed the source, which had not changed."""
    source, index = jsonl(tmp_path / "h.jsonl", "h1", "h2", "h3", "h4", "h5"), tmp_path / "idx"
    assert ingest(capsys, source, index) == (0, "5", "0")  # shards of 2: h1 h2 | h3 h4 | h5
    (state,) = (index / "_ingest").glob("*/state.json")
    state.unlink()
    status, _, err = ingest(capsys, source, index, "--shard-size", "10")
    assert status == 2 and "is in the index, but the source now ends before it" in err, err
    assert "state.json) is gone and the first ingestion cut shards of another size than 10: give that " \
           "--shard-size again" in err, err
    assert ingest(capsys, source, index) == (0, "0", "3")  # its first size again: every shard found, none twice
    assert doc_ids(index) == ["h1", "h2", "h3", "h4", "h5"]
