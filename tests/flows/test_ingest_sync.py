"""``tessera ingest --sync``: the index follows a source whose ingested files were edited or removed since. The
shards before the first change are kept (not embedded again), those from it on are ingested again under new ids,
and the documents the source no longer has are deleted; an interrupted sync goes on with the next ingest. Real
files and real ingests (local executor, BM25 only: no model loads), run as a user runs the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows.commands import main
from flows.ingestion.ledger import open_failures_at
from flows.ingestion.pending import describe, unfinished
from operators.store import Index

TESSERA = Path(sys.executable).with_name("tessera")
NOTES = {"n1.md": "Kiwi are flightless birds.", "n2.md": "Tui sing at dawn.", "n3.md": "Kea are alpine parrots.",
         "n4.md": "Weka steal shiny things.", "n5.md": "Takahe graze on tussock."}


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    folder = tmp_path / "notes"
    folder.mkdir()
    for name, text in NOTES.items():
        (folder / name).write_text(f"{text}\n")
    return folder


def ingest(capsys, source: Path, index: Path, *extra: str, executor: str = "local") -> tuple[int, dict, str]:
    """The command's status, its --json report ({} when it failed) and its stderr."""
    capsys.readouterr()
    status = main(["ingest", "--source", str(source), "--index", str(index), "--no-dense", "--no-chunk",
                   "--executor", executor, "--quiet", "--shard-size", "2", "--json", *extra])
    out, err = capsys.readouterr()
    return status, json.loads(out) if status == 0 else {}, err


def live(index: Path) -> dict[str, str]:
    """Each live document's id and text (no document twice)."""
    table = Index.open(index).columns(["doc_id", "text"])[1]
    ids = table.column("doc_id").to_pylist()
    assert len(ids) == len(set(ids)), ids
    return dict(zip(ids, table.column("text").to_pylist()))


def top(index: Path, query: str) -> str:
    return Index.open(index).search_bm25([query], k=1)[0].docnos[0]


def test_an_edited_and_a_removed_file_are_followed_and_the_shards_before_them_kept(tmp_path, folder, capsys,
                                                                                   caplog, executor_kind):
    index = tmp_path / "idx"
    assert ingest(capsys, folder, index)[0] == 0  # shards: n1 n2 | n3 n4 | n5
    first = {info.id for info in Index.open(index).manifest.shards}
    (folder / "n3.md").write_text("Kea now nest in old beech trees.\n")
    (folder / "n4.md").unlink()

    status, _, err = ingest(capsys, folder, index)
    assert status == 2 and f"changed: {folder / 'n3.md'}" in err and f"removed: {folder / 'n4.md'}" in err, err
    assert "--sync" in err, err  # the refusal says how to follow the source
    assert "documents added to one file of several" not in err  # a Markdown file holds one document, grown or not
    assert live(index)["n4.md"].startswith("Weka")  # refused: nothing changed

    status, report, err = ingest(capsys, folder, index, "--sync", executor=executor_kind)
    assert status == 0, err
    assert "sync: the source changed from document 2 on" in caplog.text
    assert report["docs"] == 2 and report["docs_deleted"] == 1, report  # n3 and n5 again; n4 gone; n1, n2 kept
    docs = live(index)
    assert sorted(docs) == ["n1.md", "n2.md", "n3.md", "n5.md"]
    assert docs["n3.md"].startswith("Kea now nest")
    assert top(index, "beech trees") == "n3.md"
    assert Index.open(index).search_bm25(["shiny"], k=5)[0].docnos == []  # the removed file's text is not found
    kept = sorted(first - {info.id for info in Index.open(index).manifest.shards if info.id.endswith("r1")})
    assert len(kept) == 3 and live_in(index, kept[0]) == 2  # shard 0 (n1, n2) untouched, still live

    status, report, _ = ingest(capsys, folder, index)  # followed: a plain ingest has nothing to do
    assert status == 0 and report["docs"] == 0 and report["shards_skipped"] == report["shards_total"] == 2
    (folder / "n6.md").write_text("Pukeko wade in swamps.\n")  # and a file added since is appended as before
    status, report, _ = ingest(capsys, folder, index)
    assert status == 0 and report["docs"] == 1 and top(index, "swamps") == "n6.md"
    assert sorted(live(index)) == ["n1.md", "n2.md", "n3.md", "n5.md", "n6.md"]


def live_in(index: Path, shard: str) -> int:
    """How many live chunks the shard has."""
    from operators.store import shard as shard_io

    opened = Index.open(index)
    info = next(i for i in opened.manifest.shards if i.id == shard)
    return int(shard_io.live_mask(opened.manifest, shard, info.n_chunks).sum())


def test_a_file_removed_from_the_end_and_a_second_sync_of_an_earlier_change(tmp_path, folder, capsys):
    index = tmp_path / "idx"
    assert ingest(capsys, folder, index)[0] == 0
    (folder / "n5.md").unlink()  # the source now ends before its last shard
    status, report, err = ingest(capsys, folder, index, "--sync")
    assert status == 0 and report["docs"] == 0 and report["docs_deleted"] == 1, (report, err)
    assert sorted(live(index)) == ["n1.md", "n2.md", "n3.md", "n4.md"]
    (folder / "n1.md").write_text("Kiwi lay enormous eggs.\n")  # then the first file: every shard again
    (folder / "n5.md").write_text("Takahe came back.\n")
    status, report, err = ingest(capsys, folder, index, "--sync")
    assert status == 0 and report["docs"] == 5 and report["docs_deleted"] == 0, (report, err)
    assert live(index)["n1.md"].startswith("Kiwi lay") and top(index, "came back") == "n5.md"
    assert {i.id.rsplit("-", 1)[1] for i in Index.open(index).manifest.shards} >= {"00000r2", "00001r2", "00002r2"}


@pytest.mark.process
def test_an_interrupted_sync_goes_on_with_the_next_ingest_without_sync(tmp_path, folder, capsys, caplog):
    index = tmp_path / "idx"
    assert ingest(capsys, folder, index)[0] == 0
    key = next((index / "_ingest").iterdir()).name
    (folder / "n1.md").write_text("Kiwi probe for worms at night.\n")
    (folder / "n4.md").unlink()
    args = ["ingest", "--source", str(folder), "--index", str(index), "--no-dense", "--no-chunk", "--executor",
            "local", "--quiet", "--shard-size", "2", "--sync"]
    crashed = subprocess.run([str(TESSERA), *args], capture_output=True, text=True, timeout=300,
                             env={**os.environ, "TESSERA_FAULT": f"crash_after_write:{key}-00001r1"})
    assert crashed.returncode == 75, crashed.stderr
    assert live(index)["n1.md"].startswith("Kiwi probe")  # the first new shard is in, swapped for the old one
    assert "n4.md" in live(index)  # the removed file's document goes at the sync's end
    [record] = unfinished(index)
    assert record["syncing"] and describe(record).startswith(f"unfinished sync of {folder} (1 of 2 shard(s) "
                                                             "committed, 2 document(s) not yet updated; the "
                                                             "documents it no longer has are deleted at its end")

    status, _, err = ingest(capsys, folder, index, "--replace")  # would be ignored by the sync that goes on
    assert status == 2 and "field '--replace': the last sync of this source was cut short: finish it first" in err
    assert "then ingest with --replace" in err, err
    status, report, err = ingest(capsys, folder, index)  # no --sync: the sync recorded in staging goes on
    assert status == 0 and report["docs_deleted"] == 1, (report, err)
    assert "the last sync of this source was cut short: it goes on" in caplog.text
    assert sorted(live(index)) == ["n1.md", "n2.md", "n3.md", "n5.md"]
    status, report, _ = ingest(capsys, folder, index)
    assert status == 0 and report["docs"] == report["docs_deleted"] == 0


def test_a_line_fixed_in_a_changed_part_of_a_jsonl_source_comes_in_and_its_failure_is_resolved(tmp_path, folder,
                                                                                                capsys, caplog):
    index, corpus = tmp_path / "idx", tmp_path / "corpus.jsonl"
    lines = [json.dumps({"_id": f"d{i}", "text": f"document number {i}"}) for i in range(5)]
    corpus.write_text("\n".join([lines[0], '{"_id": "d1", "text": "broken', *lines[2:]]) + "\n")
    assert ingest(capsys, corpus, index)[0] == 0
    assert len(open_failures_at(index)) == 1
    lines[0] = json.dumps({"_id": "d0", "text": "document zero, edited"})
    corpus.write_text("\n".join(lines) + "\n")  # the line fixed, and its shard's other document edited
    status, report, err = ingest(capsys, corpus, index, "--sync")
    assert status == 0 and report["open_failures"] == 0 and report["failures"] == 0, (report, err)
    assert sorted(live(index)) == ["d0", "d1", "d2", "d3", "d4"] and not open_failures_at(index)
    caplog.clear()
    corpus.write_text("\n".join([*lines[:3], '{"_id": "d3", broken', lines[4]]) + "\n")  # a line broken since
    status, report, err = ingest(capsys, corpus, index, "--sync")
    assert status == 0 and report["docs_deleted"] == 1 and report["open_failures"] == 1, (report, err)
    assert caplog.text.count("left out:") == 1, caplog.text  # read twice (before and after the sync's restage)
    assert sorted(live(index)) == ["d0", "d1", "d2", "d4"]


def test_a_file_with_no_text_is_said_once_though_a_sync_reads_the_folder_twice(tmp_path, folder, capsys, caplog):
    """A sync reads the source, finds the change, and reads it again to stage it: "blank.md: no text: no document"
    was said at each reading."""
    index = tmp_path / "idx"
    (folder / "blank.md").write_text("   \n")
    assert ingest(capsys, folder, index)[0] == 0
    (folder / "n1.md").write_text("Kiwi are flightless birds of New Zealand.\n")
    caplog.clear()
    status, report, err = ingest(capsys, folder, index, "--sync")
    assert status == 0 and "sync: the source changed from document 0 on" in caplog.text, (report, err)
    assert caplog.text.count("blank.md: no text: no document") == 1, caplog.text


def test_sync_is_refused_with_replace_or_retry_and_follows_a_compacted_source_by_the_ids_staging_kept(tmp_path,
                                                                                                     folder, capsys):
    index = tmp_path / "idx"
    assert ingest(capsys, folder, index)[0] == 0
    for other in ("--replace", "--retry-failed"):
        status, _, err = ingest(capsys, folder, index, "--sync", other)
        assert status == 2 and "--sync" in err and other in err, err
    Index.open(index).compact()  # the shards' folders merged: staging's record of their ids says what they held
    (folder / "n2.md").write_text("Tui mimic other birds.\n")
    (folder / "n4.md").unlink()
    status, report, err = ingest(capsys, folder, index, "--sync")
    assert status == 0 and report["docs_deleted"] == 1, (report, err)
    assert sorted(live(index)) == ["n1.md", "n2.md", "n3.md", "n5.md"] and top(index, "mimic") == "n2.md"
    Index.open(index).compact()
    (folder / "n3.md").write_text("Kea are mountain parrots.\n")
    for ids in (index / "_ingest").glob("*/ids/*"):  # as an index staged by a release that kept no ids
        ids.unlink()
    status, _, err = ingest(capsys, folder, index, "--sync")
    assert status == 2 and "merged into others by `tessera index compact`" in err, err
    assert live(index)["n3.md"].startswith("Kea are alpine")  # refused before anything changed


def test_files_read_otherwise_by_a_new_release_are_named_as_such_and_followed_with_sync(tmp_path, folder, capsys,
                                                                                       monkeypatch):
    import operators.sources.file_text as file_text

    index = tmp_path / "idx"
    (folder / "kea.html").write_text("<body><nav>Home | Birds</nav><main><p>Kea are clever.</p></main></body>")
    real = file_text.html_text
    with monkeypatch.context() as release_before:  # an earlier release kept the menu in the text
        release_before.setattr(file_text, "html_text", lambda html: (None, "Home | Birds\nKea are clever."))
        assert ingest(capsys, folder, index)[0] == 0
    assert live(index)["kea.html"].startswith("Home")
    (folder / "n0.md").write_text("Ruru call at night.\n")  # a file added: the folder is read again
    status, _, err = ingest(capsys, folder, index)
    assert status == 2 and "none of its files changed since the last ingest: this release of Tessera reads them " \
        "otherwise" in err and "--sync" in err, err
    assert file_text.html_text is real
    status, report, err = ingest(capsys, folder, index, "--sync")
    assert status == 0 and live(index)["kea.html"] == "Kea are clever." and "n0.md" in live(index), err


def test_a_sync_deletes_the_documents_of_the_shards_it_retires_never_an_id_another_source_holds_since(tmp_path,
                                                                                                     folder, capsys):
    index, other = tmp_path / "idx", tmp_path / "other"
    assert ingest(capsys, folder, index)[0] == 0
    (folder / "n2.md").unlink()
    assert ingest(capsys, folder, index, "--sync")[1]["docs_deleted"] == 1
    other.mkdir()
    (other / "n2.md").write_text("Another source's note two, about moa.\n")
    assert ingest(capsys, other, index)[0] == 0  # the id the sync deleted, now another source's
    (folder / "n5.md").write_text("Takahe were thought extinct.\n")  # only the last file of the first source
    status, report, err = ingest(capsys, folder, index, "--sync")
    assert status == 0 and report["docs_deleted"] == 0, (report, err)
    assert live(index)["n2.md"].startswith("Another source's") and top(index, "moa") == "n2.md"


def test_a_sync_replaces_its_own_documents_only_and_refuses_a_new_one_whose_id_another_source_holds(tmp_path,
                                                                                                    folder, capsys):
    index, other = tmp_path / "idx", tmp_path / "other"
    other.mkdir()
    (other / "n9.md").write_text("Another source's note nine, about moa.\n")
    assert ingest(capsys, other, index)[0] == 0
    assert ingest(capsys, folder, index)[0] == 0
    (folder / "n1.md").write_text("Kiwi lay enormous eggs.\n")  # every shard of the folder again
    (folder / "n9.md").write_text("A note nine of this folder.\n")  # and a file named as the other source's
    status, _, err = ingest(capsys, folder, index, "--sync")
    assert status == 2 and "['n9.md'] (1 in all) are already live" in err, err
    assert live(index)["n9.md"].startswith("Another source's")
    # what lifts it is said in a sync's terms: --replace is refused with --sync, and without it the sync goes on
    assert "a sync replaces its own source's documents only: give them other ids" in err and "--replace" not in err
    assert "moved here" not in err  # the path is the source's own, though the sync retired every shard of it
    [record] = unfinished(index)
    assert describe(record).count("a sync replaces its own source's documents only") == 1 and \
        "--replace" not in describe(record), describe(record)


def test_a_sync_after_a_compaction_goes_on_where_the_shards_it_retires_were_not_merged(tmp_path, folder, capsys):
    index = tmp_path / "idx"
    assert ingest(capsys, folder, index)[0] == 0
    (folder / "n1.md").write_text("Kiwi lay enormous eggs.\n")
    assert ingest(capsys, folder, index, "--sync")[0] == 0  # every shard retired once
    Index.open(index).compact()  # merges them all, the retired ones too
    (folder / "n6.md").write_text("Pukeko wade in swamps.\n")
    (folder / "n7.md").write_text("Ruru call at night.\n")
    assert ingest(capsys, folder, index)[0] == 0  # a shard of its own, after the compaction
    (folder / "n7.md").write_text("Ruru are small owls.\n")
    status, report, err = ingest(capsys, folder, index, "--sync")
    assert status == 0 and report["docs"] == 1, (report, err)  # n7 alone: its shard came after the compaction
    assert top(index, "small owls") == "n7.md" and len(live(index)) == 7


def test_a_moved_folder_edited_in_its_first_shard_is_followed_and_a_copy_is_refused_naming_the_original(tmp_path,
                                                                                                     folder, capsys):
    import shutil

    index, moved, copied = tmp_path / "idx", tmp_path / "moved", tmp_path / "copied"
    assert ingest(capsys, folder, index)[0] == 0
    folder.rename(moved)  # mv keeps the files' sizes and times: recognised, though its first shard changed
    (moved / "n1.md").write_text("Kiwi lay enormous eggs.\n")
    status, _, err = ingest(capsys, moved, index)
    assert status == 2 and f"changed: {moved / 'n1.md'}" in err and "--sync" in err, err
    status, report, err = ingest(capsys, moved, index, "--sync")
    assert status == 0 and report["docs"] == 5, err  # its first shard changed: every shard again
    assert live(index)["n1.md"].startswith("Kiwi lay enormous eggs.") and len(live(index)) == 5
    shutil.copytree(moved, copied)  # a copy, edited in its first shard: the original is still there
    (copied / "n2.md").write_text("Tui mimic other birds.\n")
    status, _, err = ingest(capsys, copied, index, "--sync")
    assert status == 2 and f"this path is new to the index, while {moved} was read the same way" in err, err
    assert "sync it there (move it back), or ingest it into a new index" in err and "--replace" not in err, err
    assert live(index)["n2.md"].startswith("Tui sing")


@pytest.mark.process
def test_a_sync_of_a_moved_folder_cut_short_before_its_first_commit_goes_on(tmp_path, folder, capsys):
    index, moved = tmp_path / "idx", tmp_path / "moved"
    assert ingest(capsys, folder, index)[0] == 0
    key = next((index / "_ingest").iterdir()).name
    folder.rename(moved)
    (moved / "n1.md").write_text("Kiwi lay enormous eggs.\n")  # the first shard: every shard is retired
    args = ["ingest", "--source", str(moved), "--index", str(index), "--no-dense", "--no-chunk", "--executor",
            "local", "--quiet", "--shard-size", "2", "--sync"]
    crashed = subprocess.run([str(TESSERA), *args], capture_output=True, text=True, timeout=300,
                             env={**os.environ, "TESSERA_FAULT": f"crash_after_write:{key}-00000r1"})
    assert crashed.returncode == 75, crashed.stderr  # no new shard committed: the old ones are all retired
    status, report, err = ingest(capsys, moved, index, "--sync")
    assert status == 0 and report["docs"] == 5, err  # the source recorded at this path goes on
    assert live(index)["n1.md"].startswith("Kiwi lay enormous eggs.") and len(live(index)) == 5
    assert [record["source"] for record in unfinished(index)] == []


@pytest.mark.process
def test_a_source_ingested_before_keeps_its_shard_size_unless_another_is_given(tmp_path, folder, capsys):
    index = tmp_path / "idx"
    assert ingest(capsys, folder, index)[0] == 0  # --shard-size 2
    (folder / "n5.md").write_text("Takahe were thought extinct.\n")
    base = ["ingest", "--source", str(folder), "--index", str(index), "--no-dense", "--no-chunk", "--executor",
            "local", "--quiet", "--json", "--sync"]
    capsys.readouterr()
    assert main(base) == 0  # no --shard-size: the source's own 2, not the default 5000
    report = json.loads(capsys.readouterr().out)
    assert report["docs"] == 1 and report["shards_total"] == 3, report
    assert main([*base, "--shard-size", "3"]) == 2
    assert "this source was ingested with --shard-size 2" in capsys.readouterr().err
