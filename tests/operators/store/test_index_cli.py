"""``tessera index info/documents/add/update/delete`` through flows.commands.main."""

from __future__ import annotations

import shlex
import json

import numpy as np
import pyarrow as pa
import pytest

from flows.commands import main
from operators.store import Index
from tests.text_checks import TRACEBACK


def _write(path, docs):
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return str(path)


def test_add_update_delete_and_info(tmp_path, sample_docs, capsys):
    idx = str(tmp_path / "idx")
    docs = [{**d, "lang": "en"} for d in sample_docs[:40]]
    assert main(["index", "add", idx, _write(tmp_path / "a.jsonl", docs), "--no-dense"]) == 0
    index = Index.open(idx)
    assert len(index) == 40 and not index.settings.dense
    assert index.documents([docs[0]["_id"]]).column("lang").to_pylist() == ["en"]  # extra fields kept

    changed = [{"_id": docs[3]["_id"], "title": "Replaced", "text": "zebra crossing"}]
    assert main(["index", "update", idx, _write(tmp_path / "b.jsonl", changed)]) == 0
    capsys.readouterr()  # a typo among the ids deletes nothing, and names it
    assert main(["index", "delete", idx, "--doc-id", docs[7]["_id"], "--doc-id", "no-such-doc"]) == 2
    assert "no live chunk has doc id 'no-such-doc', so nothing was deleted" in capsys.readouterr().err
    assert len(Index.open(idx)) == 40
    assert main(["index", "delete", idx, "--doc-id", docs[7]["_id"], "--doc-id", docs[8]["_id"]]) == 0
    index = Index.open(idx)
    assert len(index) == 38
    assert index.search_bm25(["zebra"], k=3)[0].docnos == [docs[3]["_id"]]
    assert docs[7]["_id"] not in index.search_bm25([docs[7]["title"]], k=40)[0].docnos

    capsys.readouterr()
    assert main(["index", "info", idx, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["counts"] == {"shards": 2, "chunks": 41, "tombstones": 3, "live_chunks": 38}
    assert main(["index", "info", idx]) == 0
    out = capsys.readouterr().out
    assert "3 tombstone(s), 38 live\n" in out and "compact" not in out  # a few deleted: nothing to say
    assert main(["index", "delete", idx, *(f"--doc-id={d['_id']}" for d in docs[10:35])]) == 0
    capsys.readouterr()
    assert main(["index", "info", idx]) == 0
    compact = shlex.join(["tessera", "index", "compact", str(idx)])
    assert f"28 tombstone(s), 13 live (most are deleted: `{compact}` drops them)" in capsys.readouterr().out


def test_documents_lists_them_in_the_order_added_with_passages_and_metadata(tmp_path, sample_docs, capsys):
    idx = str(tmp_path / "idx")
    first = [{**d, "lang": "en"} for d in sample_docs[:3]]
    later = [{"_id": "notes-p1", "title": "Notes", "text": "Kea are alpine parrots.", "path": "notes.pdf", "page": 1}]
    assert main(["index", "add", idx, _write(tmp_path / "a.jsonl", first), "--no-dense"]) == 0
    assert main(["index", "add", idx, _write(tmp_path / "b.jsonl", later)]) == 0  # a shard with other columns
    assert main(["index", "delete", idx, "--doc-id", first[1]["_id"]]) == 0
    capsys.readouterr()
    assert main(["index", "documents", idx, "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    assert listing["total"] == 3 and [d["id"] for d in listing["documents"]] == [
        first[0]["_id"], first[2]["_id"], "notes-p1"]
    assert listing["documents"][0] == {"id": first[0]["_id"], "title": first[0]["title"], "passages": 1,
                                       "metadata": {"lang": "en"}}
    assert listing["documents"][2]["metadata"] == {"path": "notes.pdf", "page": 1}
    assert main(["index", "documents", idx, "--offset", "2", "--limit", "5"]) == 0
    shown = capsys.readouterr().out
    assert "documents 3-3 of 3" in shown and "notes-p1" in shown and first[0]["_id"] not in shown
    assert main(["index", "documents", idx, "--offset", "99999"]) == 0  # an empty table under a cut title before
    assert capsys.readouterr().out.strip() == f"{idx}: no document from 100000 on (it holds 3)"


@pytest.mark.parametrize("option, value, said", [
    ("--limit", "x", "argument --limit: 'x' is not a whole number"),  # "expected a whole number of documents"
    ("--limit", "0", "argument --limit: must be at least 1"),  # 0 said "no document from 1 on (it holds 3)" once
    ("--limit", "-1", "argument --limit: must be at least 1"),
    ("--offset", "x", "argument --offset: 'x' is not a whole number"),
    ("--offset", "-1", "argument --offset: must be 0 or more"),
])
def test_documents_numeric_options_are_refused_in_the_other_commands_words(tmp_path, capsys, option, value, said):
    """``--limit``/``--offset`` had words of their own ("expected a whole number of documents, got 'x'"), where every
    other command's number says ``'x' is not a whole number`` and ``must be at least 1`` (``_support``)."""
    with pytest.raises(SystemExit) as exited:  # argparse's usage error, before the index is opened
        main(["index", "documents", str(tmp_path / "idx"), option, value])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.rstrip().endswith(said) and TRACEBACK not in err


def test_documents_shows_an_id_holding_a_newline_escaped_on_its_own_row(tmp_path, capsys):
    """An id with a newline (a source's id field may hold one) printed over two rows of the table, the second one
    a row of its own to the eye; the table shows it as its repr, and ``--json`` keeps the id itself."""
    idx = str(tmp_path / "idx")
    docs = [{"_id": "bees\nants", "text": "honey bees"}, {"_id": "kea\tparrots", "text": "alpine parrots"}]
    assert main(["index", "add", idx, _write(tmp_path / "a.jsonl", docs), "--no-dense"]) == 0
    capsys.readouterr()
    assert main(["index", "documents", idx]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if "│" in line]  # the body's (the head has ┃)
    assert len(rows) == 2 and "'bees\\nants'" in rows[0] and "'kea\\tparrots'" in rows[1], rows
    assert main(["index", "documents", idx, "--json"]) == 0
    assert [d["id"] for d in json.loads(capsys.readouterr().out)["documents"]] == ["bees\nants", "kea\tparrots"]


def test_documents_of_an_empty_index_says_it_holds_none(tmp_path, capsys):
    """An index whose every document was deleted (or an empty source ingested) said "no document from 1 on (it
    holds 0)", as if the listing had started too far."""
    idx = str(tmp_path / "idx")
    assert main(["index", "add", idx, _write(tmp_path / "a.jsonl", [{"_id": "d1", "text": "bees"}]), "--no-dense"]) == 0
    assert main(["index", "delete", idx, "--doc-id", "d1"]) == 0
    capsys.readouterr()
    for offset in ("0", "5"):
        assert main(["index", "documents", idx, "--offset", offset]) == 0
        assert capsys.readouterr().out.strip() == f"{idx} holds no documents"


def test_errors_are_one_line_with_exit_status_2(tmp_path, capsys):
    assert main(["index", "info", str(tmp_path / "nothing")]) == 2
    assert "no index at" in capsys.readouterr().err
    assert main(["index", "add", str(tmp_path / "i"), str(tmp_path / "missing.jsonl"), "--no-dense"]) == 2
    assert "no such file" in capsys.readouterr().err
    docs = _write(tmp_path / "a.jsonl", [{"_id": "bees", "text": "honey bees"}])
    assert main(["index", "add", str(tmp_path / "i"), docs, "--no-dense", "--no-bm25"]) == 2  # was an internal error
    err = capsys.readouterr().err
    assert "--no-dense and --no-bm25 together" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "i").exists()


@pytest.mark.parametrize("option", [("--dense-type", "hnsw"), ("--dense-type", "flat"), ("--encoder", "x")],
                         ids=["hnsw", "flat", "encoder"])  # flat: the default, given all the same
def test_an_option_for_vectors_with_no_dense_is_refused_not_ignored(tmp_path, capsys, option):
    docs = _write(tmp_path / "a.jsonl", [{"_id": "bees", "text": "honey bees"}])
    new, old = tmp_path / "new", tmp_path / "old"
    assert main(["index", "add", str(old), _write(tmp_path / "b.jsonl", [{"_id": "ants", "text": "ants"}]),
                 "--no-dense"]) == 0
    capsys.readouterr()
    for index in (new, old):  # refused whether the index would be made or is there already
        assert main(["index", "add", str(index), docs, "--no-dense", *option]) == 2
        err = capsys.readouterr().err
        assert f"field '{option[0]}': --no-dense and {option[0]} together" in err and len(err.strip().splitlines()) == 1
    assert not new.exists() and len(Index.open(old)) == 1


def test_a_new_index_option_against_an_existing_index_is_refused_not_ignored(tmp_path, capsys):
    bm25_only = str(tmp_path / "bm25")
    assert main(["index", "add", bm25_only, _write(tmp_path / "a.jsonl", [{"_id": "ants", "text": "ants"}]),
                 "--no-dense"]) == 0
    capsys.readouterr()
    more = _write(tmp_path / "b.jsonl", [{"_id": "bees", "text": "honey bees"}])
    assert main(["index", "add", bm25_only, more, "--no-bm25"]) == 2  # it has BM25: adding would keep it
    err = capsys.readouterr().err
    assert "field '--no-bm25'" in err and "has a BM25 index" in err and len(err.strip().splitlines()) == 1
    assert len(Index.open(bm25_only)) == 1
    for option in (["--encoder", "nosuch-model"], ["--dense-type", "hnsw"]):  # nothing embeds: ignored before
        assert main(["index", "add", bm25_only, more, *option]) == 2
        err = capsys.readouterr().err
        assert f"field '{option[0]}'" in err and "has no vectors (built with --no-dense)" in err, err
    assert len(Index.open(bm25_only)) == 1
    assert main(["index", "add", bm25_only, more, "--no-dense"]) == 0  # as it is: accepted
    assert len(Index.open(bm25_only)) == 2


@pytest.mark.slow
def test_add_embeds_with_the_index_encoder(tmp_path, sample_docs, caplog):
    idx = str(tmp_path / "dense")
    assert main(["index", "add", idx, _write(tmp_path / "a.jsonl", sample_docs[:8])]) == 0
    from operators.models import load_sentence_transformer

    query = load_sentence_transformer("all-MiniLM-L6-v2").encode(["Bee honey insects"], normalize_embeddings=True)
    index = Index.open(idx)
    assert index.settings.dense and len(index) == 8
    hits = index.search_dense(query, k=8)[0]
    assert len(hits) == 8 and 0 < hits.scores[0] <= 1.0001
    # another encoder for the index's documents is refused, not ignored; its own is accepted
    more = _write(tmp_path / "b.jsonl", sample_docs[8:10])
    assert main(["index", "add", idx, more, "--encoder", "tessera-static"]) == 2 and len(Index.open(idx)) == 8
    assert main(["index", "add", idx, more, "--dense-type", "hnsw"]) == 2 and len(Index.open(idx)) == 8  # it is flat
    assert main(["index", "add", idx, more, "--no-dense"]) == 2 and len(Index.open(idx)) == 8
    assert main(["index", "add", idx, more, "--encoder", "all-MiniLM-L6-v2"]) == 0 and len(Index.open(idx)) == 10
    # a record longer than the encoder reads: the warning's advice is what this command's user can do, not a step's
    caplog.clear()
    long = _write(tmp_path / "c.jsonl", [{"_id": "long", "text": " ".join(["honey bees"] * 400)}])
    assert main(["index", "add", idx, long]) == 0
    [cut] = [r.getMessage() for r in caplog.records if "only their beginnings are embedded" in r.getMessage()]
    assert "tessera ingest --source FILE --index INDEX cuts documents" in cut and "preprocess.chunk" not in cut, cut


def test_update_reports_what_its_commit_replaced_under_a_concurrent_delete(tmp_path, sample_docs, capsys, monkeypatch):
    idx = str(tmp_path / "idx")
    assert main(["index", "add", idx, _write(tmp_path / "a.jsonl", sample_docs[:40]), "--no-dense"]) == 0
    changed = [{**d, "text": "zebra crossing"} for d in sample_docs[:4]]
    write_shard = Index.write_shard

    def write_then_someone_deletes(self, shard_id, chunks, **options):
        info = write_shard(self, shard_id, chunks, **options)
        # another process deletes two of the updated documents and three others before the update commits
        Index.open(idx).delete(doc_ids=[d["_id"] for d in sample_docs[2:7]])
        return info

    monkeypatch.setattr(Index, "write_shard", write_then_someone_deletes)
    capsys.readouterr()
    assert main(["index", "update", idx, _write(tmp_path / "b.jsonl", changed)]) == 0
    # not 7: the delete's tombstones are not the update's; the two it deleted first are new again
    assert "replacing 2, adding 2 new document(s);" in capsys.readouterr().out
    assert len(Index.open(idx)) == 40 - 5 + 2


def test_an_add_racing_another_of_the_same_ids_says_another_writer_added_them(tmp_path, sample_docs, capsys,
                                                                              monkeypatch):
    """Two adds of one file at once: both pass the check before embedding, one commit wins; the other's refusal
    gave the store's advice for every caller (``--replace``, ``Index.upsert``) under the field 'docno'."""
    idx = str(tmp_path / "idx")
    assert main(["index", "add", idx, _write(tmp_path / "a.jsonl", sample_docs[:3]), "--no-dense"]) == 0
    racing = _write(tmp_path / "b.jsonl", sample_docs[3:6])
    write_shard = Index.write_shard

    def write_while_another_adds(self, shard_id, chunks, **options):
        info = write_shard(self, shard_id, chunks, **options)
        monkeypatch.setattr(Index, "write_shard", write_shard)
        assert main(["index", "add", idx, racing]) == 0  # the other writer, first to commit
        return info

    monkeypatch.setattr(Index, "write_shard", write_while_another_adds)
    capsys.readouterr()
    assert main(["index", "add", idx, racing]) == 2
    err = capsys.readouterr().err
    assert "field 'FILE': document(s) [" in err and "another writer added them while this add ran" in err, err
    assert "--replace" not in err and len(Index.open(idx)) == 6
    assert sorted(p.name for p in (tmp_path / "idx" / "shards").iterdir() if not p.name.startswith(".")) == sorted(
        s.id for s in Index.open(idx).manifest.shards)


def test_failed_add_leaves_no_shard_folder(tmp_path, sample_docs, capsys):
    idx = tmp_path / "idx"
    assert main(["index", "add", str(idx), _write(tmp_path / "a.jsonl", sample_docs[:10]), "--no-dense"]) == 0
    before = sorted(p.name for p in (idx / "shards").iterdir())
    clash = _write(tmp_path / "b.jsonl", sample_docs[5:15])  # five docnos already live: the commit refuses them
    assert main(["index", "add", str(idx), clash]) == 2
    assert "already live" in capsys.readouterr().err
    assert sorted(p.name for p in (idx / "shards").iterdir()) == before
    assert Index.open(idx).uncommitted() == []


def test_an_add_of_ids_the_index_holds_is_refused_before_anything_is_embedded(tmp_path, sample_docs, capsys,
                                                                             monkeypatch):
    """It embedded the whole file (minutes for a large one), and then the commit refused it."""
    from flows.commands import index_file
    from operators.embed.sentence_transformer import vectors_to_arrow
    from operators.store import IndexSettings

    idx = tmp_path / "idx"
    docs = pa.table({"docno": [d["_id"] for d in sample_docs[:10]], "doc_id": [d["_id"] for d in sample_docs[:10]],
                     "text": [d["text"] for d in sample_docs[:10]],
                     "vector": vectors_to_arrow(np.eye(10, 384, dtype=np.float32))})
    Index.create(idx, IndexSettings(dim=384)).add(docs)  # a dense index of MiniLM's width, no model loaded

    def not_embedded(*args, **kwargs):
        raise AssertionError("the file was embedded")

    monkeypatch.setattr(index_file, "_embedded", not_embedded)
    capsys.readouterr()
    assert main(["index", "add", str(idx), _write(tmp_path / "b.jsonl", sample_docs[5:15])]) == 2
    err = capsys.readouterr().err
    assert f"(5 in all) are already live in {idx}; nothing was embedded or written: replace them with `tessera index " \
        "update`" in err, err
    assert len(Index.open(idx)) == 10


def test_info_verifies_the_shards_and_names_the_damaged_one(tmp_path, sample_docs, capsys):
    idx = tmp_path / "idx"
    for n, part in enumerate((sample_docs[:10], sample_docs[10:20], sample_docs[20:30])):
        assert main(["index", "add", str(idx), _write(tmp_path / f"{n}.jsonl", part), "--no-dense"]) == 0
    shards = [s.id for s in Index.open(idx).manifest.shards]
    target = idx / "shards" / shards[1] / "bm25_tf.npz"
    data = bytearray(target.read_bytes())
    data[-5] ^= 0xFF
    target.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["index", "info", str(idx)]) == 2
    out, err = capsys.readouterr()
    assert f"{shards[1]}: 10 chunks, 0 tombstoned  DAMAGED: bm25_tf.npz does not match its sha256" in out
    assert f"{shards[0]}: 10 chunks, 0 tombstoned\n" in out
    assert f"1 damaged shard(s): {shards[1]}" in err
    assert main(["index", "info", str(idx), "--json"]) == 2
    info = json.loads(capsys.readouterr().out)
    assert list(info["damaged"]) == [shards[1]] and "sha256" in info["damaged"][shards[1]]
    assert main(["index", "info", str(idx), "--no-verify"]) == 0
    assert main(["run", "bm25", "--index", str(idx), "--queries", "music", "--no-cache", "--quiet"]) == 2
    assert f"1 damaged shard(s): {shards[1]} (bm25_tf.npz does not match" in capsys.readouterr().err


def test_add_creates_a_new_index_only_for_chunks_it_can_write(tmp_path, sample_docs, capsys, monkeypatch):
    idx = tmp_path / "idx"
    twice = _write(tmp_path / "a.jsonl", sample_docs[:3] + sample_docs[:1])
    assert main(["index", "add", str(idx), twice, "--no-dense"]) == 2
    assert "duplicate id" in capsys.readouterr().err and not idx.exists()
    # a new dense index takes its dim from the encoder's vectors (not the 384 default)
    from flows.commands import index as index_command
    from operators.embed.sentence_transformer import vectors_to_arrow

    def eight_wide(settings, file, skip_bad_lines, **_):
        docs = pa.table({"docno": ["a", "b"], "doc_id": ["a", "b"], "text": ["x", "y"]})
        return docs.append_column("vector", vectors_to_arrow(np.eye(2, 8, dtype=np.float32)))

    monkeypatch.setattr(index_command, "_chunks", eight_wide)
    assert main(["index", "add", str(idx), twice, "--encoder", "some-8d-encoder"]) == 0
    assert Index.open(idx).settings.dim == 8 and len(Index.open(idx)) == 2


def test_a_bad_line_refuses_the_whole_file_unless_skipped(tmp_path, sample_docs, capsys):
    idx = str(tmp_path / "idx")
    assert main(["index", "add", idx, _write(tmp_path / "a.jsonl", sample_docs[:3]), "--no-dense"]) == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(sample_docs[3]) + "\nnot json\n" + json.dumps(sample_docs[4]) + "\n")
    capsys.readouterr()
    for command in ("add", "update"):
        assert main(["index", command, idx, str(bad)]) == 2
        err = capsys.readouterr().err
        assert f"{bad}, line 2: not valid JSON" in err and "nothing was written (--skip-bad-lines skips" in err
        assert "on_error" not in err  # a flow step's param, not this command's
        assert len(Index.open(idx)) == 3
    assert main(["index", "add", idx, str(bad), "--skip-bad-lines"]) == 0
    assert len(Index.open(idx)) == 5


def test_lines_skipped_from_standard_input_are_named_as_stdin_not_a_temporary_file(tmp_path, sample_docs, caplog,
                                                                                  monkeypatch):
    """The temporary copy of standard input is gone once the command ends: a warning naming it pointed nowhere."""
    import io

    idx = str(tmp_path / "idx")
    piped = json.dumps(sample_docs[0]) + "\nnot json\n" + json.dumps(sample_docs[1]) + "\n"
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(piped.encode())))
    assert main(["index", "add", idx, "-", "--no-dense", "--skip-bad-lines"]) == 0
    [skipped] = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert "skipped 1 unreadable line(s) in <stdin> (lines 2)" in skipped and "tessera-add-" not in skipped
    assert len(Index.open(idx)) == 2


@pytest.mark.parametrize("command", ["add", "update"])
def test_lines_skipped_are_reported_without_the_flow_step_a_user_never_named(tmp_path, sample_docs, caplog, command):
    """The warning began ``sources.jsonl [index]:``, the reader step's name, which ``index add`` never shows."""
    idx = str(tmp_path / "idx")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(sample_docs[0]) + "\nnot json\n")
    assert main(["index", "add", idx, _write(tmp_path / "a.jsonl", sample_docs[1:2]), "--no-dense"]) == 0
    assert main(["index", command, idx, str(bad), "--skip-bad-lines"]) == 0
    [skipped] = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert skipped == f"skipped 1 unreadable line(s) in {bad} (lines 2)"


def test_an_id_twice_in_the_file_is_refused_naming_both_lines(tmp_path, sample_docs, capsys):
    """The store's own refusal named a shard id that was never made, and no file or line."""
    idx = str(tmp_path / "idx")
    assert main(["index", "add", idx, _write(tmp_path / "a.jsonl", sample_docs[:3]), "--no-dense"]) == 0
    twice = _write(tmp_path / "twice.jsonl", [sample_docs[3], sample_docs[4], {**sample_docs[3], "text": "again"}])
    capsys.readouterr()
    for command in ("add", "update"):
        assert main(["index", command, idx, twice]) == 2
        err = capsys.readouterr().err
        assert f"{twice}, line 3: duplicate id {sample_docs[3]['_id']}, first at {twice}:1" in err, err
        assert "shard" not in err
        assert len(Index.open(idx)) == 3 and Index.open(idx).search_bm25([sample_docs[0]["title"]], k=1)[0].docnos


def test_documents_show_metadata_as_json_writes_it(tmp_path, capsys, monkeypatch):
    """A front matter's ``confidential: false`` showed as Python's ``False`` in the table, ``false`` in --json."""
    idx = str(tmp_path / "idx")
    docs = [{"_id": "memo", "title": "Memo", "text": "Parking moves to level 2.", "confidential": False,
             "tags": ["parking", "office"]}]
    assert main(["index", "add", idx, _write(tmp_path / "a.jsonl", docs), "--no-dense"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "200")  # one line a row
    assert main(["index", "documents", idx]) == 0
    shown = capsys.readouterr().out
    assert "confidential: false" in shown and "confidential: False" not in shown
    assert 'tags: ["parking", "office"]' in shown


def _live_vectors(idx: str) -> dict[str, np.ndarray]:
    from pathlib import Path

    from operators.store.shard import live_vectors

    return live_vectors(Path(idx) / "shards", Index.open(idx).manifest)


@pytest.mark.integration
def test_update_keeps_the_vectors_of_documents_whose_text_did_not_change(tmp_path, sample_docs, capsys):
    idx = str(tmp_path / "dense")
    assert main(["index", "add", idx, _write(tmp_path / "a.jsonl", sample_docs[:4])]) == 0
    before = _live_vectors(idx)
    first, second = sample_docs[0]["_id"], sample_docs[1]["_id"]
    fixed = [{**sample_docs[0], "year": 2020},  # a metadata fix: nothing to encode
             {**sample_docs[1], "text": "Bees make honey from the nectar of flowers."}]
    capsys.readouterr()
    assert main(["index", "update", idx, _write(tmp_path / "b.jsonl", fixed), "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["kept_vectors"] == 1 and done["replaced_chunks"] == 2 and done["live"] == 4, done
    after = _live_vectors(idx)
    assert np.array_equal(after[first], before[first]) and not np.allclose(after[second], before[second])
    from operators.models import load_sentence_transformer

    query = load_sentence_transformer("all-MiniLM-L6-v2").encode([f"{sample_docs[1]['title']}. Bees make honey "
                                                                  "from the nectar of flowers."],
                                                                 normalize_embeddings=True)
    assert Index.open(idx).search_dense(query, k=1)[0].docnos == [second]
    table = Index.open(idx).columns(["doc_id", "year"])[1]
    assert dict(zip(table.column("doc_id").to_pylist(), table.column("year").to_pylist()))[first] == 2020
    assert main(["index", "update", idx, _write(tmp_path / "c.jsonl", fixed[:1])]) == 0
    assert "(1 kept their vectors: their text did not change)" in capsys.readouterr().out


def _bees_search(idx: str, query: str = "bees") -> pa.Table:
    from flows.api import Index as ApiIndex

    return ApiIndex.open(idx).search(query, k=10, method="bm25")


def test_a_document_without_a_title_has_an_empty_one_stored_and_in_search_results(tmp_path, capsys, monkeypatch):
    """One rule: no title is "". A document of a file where another record had a title got "", one of a file where
    none had got None, and a search gave it as None (``hit["title"][:20]`` failed). An index written so before (no
    title column in a shard) is read as it is, and its searches give "" too."""
    from operators.store import shard

    idx = str(tmp_path / "idx")
    mixed = [{"_id": "t1", "title": "Bees", "text": "honey bees"}, {"_id": "n1", "text": "bees in winter"}]
    assert main(["index", "add", idx, _write(tmp_path / "a.jsonl", mixed), "--no-dense"]) == 0
    assert main(["index", "add", idx, _write(tmp_path / "b.jsonl", [{"_id": "n2", "text": "bees swarm"}])]) == 0
    _, stored = Index.open(idx).columns(["docno", "title"])
    assert dict(zip(*stored.to_pydict().values())) == {"t1": "Bees", "n1": "", "n2": ""}
    monkeypatch.setattr(shard, "_with_title", lambda chunks: chunks)  # an earlier release's writer
    Index.open(idx).add(pa.table({"docno": ["old"], "doc_id": ["old"], "text": ["bees of old"]}))
    monkeypatch.undo()
    hits = _bees_search(idx)
    assert dict(zip(hits.column("docno").to_pylist(), hits.column("title").to_pylist())) == {
        "t1": "Bees", "n1": "", "n2": "", "old": ""}


def test_added_documents_are_chunk_0_of_1_and_every_search_has_the_chunk_columns(tmp_path, capsys):
    """On an ingested (chunked) index, documents of ``index add``/``update`` had null ``chunk_index`` and
    ``total_chunks``, and a search whose hits were all such documents had no such columns; a shard written before
    (no chunk numbers) gives 0 of 1 too."""
    idx = tmp_path / "idx"
    ingested = Index.create(idx, {"dense": False})  # as tessera ingest writes its chunks
    ingested.add(pa.table({"docno": ["long#0", "long#1"], "doc_id": ["long", "long"], "title": ["Long", "Long"],
                           "text": ["ants build nests", "ants farm aphids"],
                           "chunk_index": pa.array([0, 1], pa.int32()), "total_chunks": pa.array([2, 2], pa.int32())}))
    ingested.add(pa.table({"docno": ["old"], "doc_id": ["old"], "title": ["Old"], "text": ["wasps of old"]}))
    assert main(["index", "add", str(idx), _write(tmp_path / "a.jsonl", [{"_id": "new", "text": "bees"}])]) == 0
    assert main(["index", "update", str(idx), _write(tmp_path / "b.jsonl", [{"_id": "long", "text": "ants"}])]) == 0
    _, stored = Index.open(idx).columns(["docno", "chunk_index", "total_chunks"])
    assert {r["docno"]: (r["chunk_index"], r["total_chunks"]) for r in stored.to_pylist()} == {
        "old": (None, None), "new": (0, 1), "long": (0, 1)}
    for query in ("bees", "ants", "wasps"):  # hits of an added, an updated, an old shard's document alone
        hits = _bees_search(str(idx), query)
        assert hits.column_names[:8] == ["qid", "query", "docno", "title", "text", "doc_id", "chunk_index",
                                         "total_chunks"], query
        assert hits.select(["chunk_index", "total_chunks"]).to_pylist() == [{"chunk_index": 0, "total_chunks": 1}]


def test_update_of_no_index_names_index_add_of_its_file(tmp_path, capsys):
    """It said only "build one with `tessera ingest --source FILE ...`", which reads a source, not these records."""
    docs = _write(tmp_path / "a.jsonl", [{"_id": "d1", "text": "bees"}])
    assert main(["index", "update", str(tmp_path / "nope"), docs]) == 2
    err = capsys.readouterr().err
    add = shlex.join(["tessera", "index", "add", str(tmp_path / "nope"), str(docs)])  # to paste: quoted paths
    assert f"no index at {tmp_path / 'nope'}" in err and f"`{add}`" in err, err
    assert "tessera ingest --source FILE" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "nope").exists()


@pytest.mark.parametrize("content, said", [
    ("not json\n{bad\n", " holds no documents: every line was skipped as unreadable (--skip-bad-lines"),
    ("\n  \n", " holds no documents\n"),  # blank lines alone: nothing was skipped
])
def test_a_file_with_no_document_says_when_every_line_was_skipped(tmp_path, capsys, content, said):
    """``--skip-bad-lines`` skipping every line ended in "FILE holds no documents", as of an empty file."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text(content)
    assert main(["index", "add", str(tmp_path / "idx"), str(bad), "--no-dense", "--skip-bad-lines"]) == 2
    err = capsys.readouterr().err
    assert f"field 'FILE': {bad}{said}" in err, err
    assert not (tmp_path / "idx").exists()


def test_a_delete_of_a_passages_docno_names_the_document_id_to_give(tmp_path, sample_docs, capsys):
    """A search shows ``docno`` (``ID#0`` on an ingested index); ``tessera index delete --doc-id ID#0`` said only "no
    live chunk has doc id", where ``Index.delete`` in Python said that delete takes the DOC_ID."""
    from flows.ingestion import ingest

    idx = tmp_path / "idx"
    ingest(_write(tmp_path / "a.jsonl", sample_docs[:3]), idx, settings={"dense": False}, spec="ingest",
           executor="local", progress=False)
    first = sample_docs[0]["_id"]
    capsys.readouterr()
    assert main(["index", "delete", str(idx), "--doc-id", f"{first}#0"]) == 2
    assert capsys.readouterr().err.strip() == (
        f"tessera: error: field '--doc-id': no live chunk has doc id '{first}#0', so nothing was deleted (a passage's "
        f"docno is DOC_ID#N: delete takes the DOC_ID: '{first}' for '{first}#0')")
    assert main(["index", "delete", str(idx), "--doc-id", first]) == 0 and len(Index.open(idx)) == 2
