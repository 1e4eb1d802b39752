"""Ingestion (flows.ingest): local and Ray give the same index, resume, the failure ledger, the CLI.

Small corpora are slices of data/sample/corpus.jsonl copied into tmp_path; chunks are
small (48 tokens) so documents have several. Dense runs embed a few dozen chunks with
the packaged MiniLM; BM25-only runs load no model.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
from pathlib import Path

import pytest

from flows.ingestion import ingest, load_spec, pending
from flows.ingestion.errors import SettingsMismatchError
from flows.ingestion.ledger import Ledger
from operators.store import Index, IndexExistsError

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample" / "corpus.jsonl"
CHUNK = {"unit": "tokens", "size": 48, "overlap": 8}
BM25_ONLY = {"dense": False}


def _lines(n: int | None = None) -> list[str]:
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)
    return lines if n is None else lines[:n]


@pytest.fixture
def corpus30(tmp_path) -> Path:
    path = tmp_path / "corpus30.jsonl"
    path.write_text("".join(_lines(30)), encoding="utf-8")
    return path


def test_bm25_only_ingest_of_the_sample_is_searchable(tmp_path, committed_docnos):
    report = ingest(SAMPLE, tmp_path / "idx", settings=BM25_ONLY, shard_size=300, executor="local",
                    chunk={"unit": "tokens", "size": 128, "overlap": 16}, progress=False)
    assert (report.docs, report.shards_written, report.chunks_embedded, report.failures) == (1000, 4, 0, 0)
    found = committed_docnos(tmp_path / "idx")
    assert len(found) == len(set(found)) == report.chunks > 1000
    index = Index.open(tmp_path / "idx")
    hit = index.search_bm25(["20th-century classical music"], k=1)[0].docnos[0]
    assert hit.startswith("wv00000#")
    row = index.documents([hit]).to_pylist()[0]
    assert row["doc_id"] == "wv00000" and row["title"] == "20th-century classical music"
    staged = list((tmp_path / "idx" / "_ingest").glob("*/*.parquet"))
    assert staged == []


def test_unchunked_docnos_are_the_source_ids(tmp_path, corpus30, committed_docnos):
    ingest(corpus30, tmp_path / "idx", settings=BM25_ONLY, shard_size=8, executor="local", progress=False)
    assert committed_docnos(tmp_path / "idx") == sorted(json.loads(line)["_id"] for line in _lines(30))


def test_replace_swaps_a_documents_passages_in_the_commit_that_adds_the_new_ones(tmp_path, corpus30):
    ingest(corpus30, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=CHUNK, progress=False)
    first = json.loads(_lines(1)[0])
    newer = tmp_path / "newer.jsonl"
    newer.write_text(json.dumps({**first, "text": "Quokkas are small wallabies of Rottnest Island."}) + "\n")
    with pytest.raises(Exception, match="already live"):  # without replace, the id is refused
        ingest(newer, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=CHUNK, progress=False)
    before = Index.open(tmp_path / "idx")
    live_before, old_passages = len(before), before.columns(["doc_id"])[1].column("doc_id").to_pylist().count(
        first["_id"])
    assert old_passages > 1
    report = ingest(newer, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=CHUNK, progress=False,
                    replace=True)
    index = Index.open(tmp_path / "idx")
    _, live = index.columns(["doc_id", "text"])
    texts = [t for d, t in zip(live.column("doc_id").to_pylist(), live.column("text").to_pylist()) if d == first["_id"]]
    assert texts == ["Quokkas are small wallabies of Rottnest Island."] and report.chunks == 1
    assert len(index) == live_before - old_passages + 1  # the old passages went, in the same commit
    assert index.search_bm25(["quokkas Rottnest"], k=1)[0].docnos == [f"{first['_id']}#0"]


def test_delete_doc_ids_go_in_the_first_commit_and_columns_a_shard_lacks_read_as_null(tmp_path, corpus30):
    ingest(corpus30, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    ids = [json.loads(line)["_id"] for line in _lines(3)]
    page = tmp_path / "page.jsonl"
    page.write_text(json.dumps({"_id": "notes-p1", "title": "Notes", "text": "Kea are alpine parrots.",
                                "path": "notes.pdf"}) + "\n")
    report = ingest(page, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False,
                    delete_doc_ids=ids[:2])
    index = Index.open(tmp_path / "idx")
    generation, live = index.columns(["doc_id", "path"])
    by_id = dict(zip(live.column("doc_id").to_pylist(), live.column("path").to_pylist()))
    assert report.shards_written == 1 and generation == 2  # one commit added the page and deleted the two
    assert ids[0] not in by_id and ids[1] not in by_id and by_id[ids[2]] is None and by_id["notes-p1"] == "notes.pdf"
    assert len(index) == 30 - 2 + 1
    # the same source again has nothing new to commit: the deletion is made alone (it was dropped without a word)
    again = ingest(page, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False,
                   delete_doc_ids=[ids[2]])
    assert again.shards_written == 0 and ids[2] not in Index.open(tmp_path / "idx").columns(["doc_id"])[1].column(
        "doc_id").to_pylist()
    assert len(Index.open(tmp_path / "idx")) == 30 - 3 + 1


@pytest.mark.parametrize("given, said", [
    ("12", "delete_doc_ids takes a list of document ids, not str '12'"),  # read as "1" and "2": two other documents
    (5, "not int 5"),
    (["a", 7], "delete_doc_ids holds int 7"),
])
def test_delete_doc_ids_that_are_not_a_list_of_ids_are_refused_before_anything_is_deleted(tmp_path, corpus30, given,
                                                                                          said):
    from flows.ingestion.errors import IngestError

    ingest(corpus30, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    with pytest.raises(IngestError, match=said) as refused:
        ingest(corpus30, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False,
               delete_doc_ids=given)
    assert refused.value.field == "delete_doc_ids" and len(Index.open(tmp_path / "idx")) == 30


def test_a_placed_embed_step_needs_its_deployment_before_anything_is_made(tmp_path, corpus30):
    import ray

    from flows.placement import PlacementError
    from flows.spec import FlowSpec

    if ray.is_initialized():  # a Ray test ran in this worker: the step would look for the deployment there
        pytest.skip("this worker is connected to Ray; the test needs a process that is not")
    spec = FlowSpec.load("ingest").to_dict()
    spec["steps"]["embed"]["placement"] = {"deployment": "all-MiniLM-L6-v2", "app": "tessera"}
    with pytest.raises(PlacementError, match="'tessera/all-MiniLM-L6-v2'.*not connected to Ray") as err:
        ingest(corpus30, tmp_path / "idx", spec=spec, executor="local", progress=False)
    assert err.value.step == "embed" and not (tmp_path / "idx").exists()


def test_a_folder_of_pdfs_is_ingested_a_page_a_document_with_its_file_and_page(tmp_path, pdf_writer):
    docs = [json.loads(line) for line in _lines(5)]
    folder = tmp_path / "pdfs"
    folder.mkdir()
    pdf_writer(folder / "music.pdf", [docs[0]["text"], docs[1]["text"]], title="Music notes")
    pdf_writer(folder / "other.pdf", [docs[2]["text"]])
    report = ingest(folder, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (report.docs, report.failures) == (3, 0)
    index = Index.open(tmp_path / "idx")
    hit = index.search_bm25([docs[1]["title"] + " " + docs[1]["text"][:200]], k=1)[0].docnos[0]
    row = index.documents([hit]).to_pylist()[0]
    assert (hit, row["path"], row["page"], row["title"]) == ("music-p2", "music.pdf", 2, "Music notes")


@pytest.mark.ray
@pytest.mark.slow
def test_ray_and_local_build_the_same_dense_index(tmp_path, corpus30, ray_session, committed_docnos):
    chunk = {**CHUNK, "tokenizer": "all-MiniLM-L6-v2"}  # the encoder's pieces: they travel to it with the chunks
    local = ingest(corpus30, tmp_path / "local", shard_size=10, executor="local", chunk=chunk, progress=False)
    events = []
    on_ray = ingest(corpus30, tmp_path / "ray", shard_size=10, executor="ray", chunk=chunk, progress=False,
                    on_progress=events.append)
    assert committed_docnos(tmp_path / "local") == committed_docnos(tmp_path / "ray")
    import faiss
    import numpy as np

    for shard in Index.open(tmp_path / "local").manifest.shards:  # the same vectors, to a thread's float noise
        local_flat, ray_flat = (faiss.read_index(str(tmp_path / side / "shards" / shard.id / "dense.faiss"))
                                for side in ("local", "ray"))
        assert np.allclose(local_flat.reconstruct_n(0, local_flat.ntotal), ray_flat.reconstruct_n(0, ray_flat.ntotal),
                           atol=1e-5)
    # the embed actors report documents as they embed them, before the driver commits a shard
    ingesting = [e for e in events if e.stage == "ingest"]
    first_commit = next(i for i, e in enumerate(ingesting) if e.shards)
    assert max(e.docs for e in ingesting[:first_commit]) > 0
    assert [e.docs for e in ingesting] == sorted(e.docs for e in ingesting)  # never counted twice
    assert (ingesting[-1].docs, ingesting[-1].shards) == (30, 3)
    assert local.chunks == on_ray.chunks == on_ray.chunks_embedded == len(committed_docnos(tmp_path / "ray"))
    assert on_ray.shards_written == 3
    index = Index.open(tmp_path / "ray")
    from operators.models import load_sentence_transformer

    query = load_sentence_transformer().encode(["20th-century classical music"], normalize_embeddings=True)
    assert index.search_dense(query, k=1)[0].docnos[0].startswith("wv00000#")


@pytest.mark.integration
def test_resume_embeds_only_unfinished_shards(tmp_path, committed_docnos):
    source = tmp_path / "corpus.jsonl"
    source.write_text("".join(_lines(20)), encoding="utf-8")
    first = ingest(source, tmp_path / "idx", shard_size=10, executor="local", chunk=CHUNK, progress=False)
    source.write_text("".join(_lines(30)), encoding="utf-8")  # ten more documents: one more shard
    second = ingest(source, tmp_path / "idx", shard_size=10, executor="local", chunk=CHUNK, progress=False)
    assert (second.shards_skipped, second.shards_written, second.docs) == (2, 1, 10)
    assert second.chunks_embedded == second.chunks  # only the new shard's chunks met the encoder
    assert len(committed_docnos(tmp_path / "idx")) == first.chunks + second.chunks
    again = ingest(source, tmp_path / "idx", shard_size=10, executor="local", chunk=CHUNK, progress=False)
    assert (again.shards_skipped, again.shards_written, again.chunks_embedded) == (3, 0, 0)


@pytest.mark.integration
def test_the_same_documents_at_another_path_resume_where_they_stopped(tmp_path, committed_docnos):
    """A moved or copied file, or a Ray job's upload folder (a new path each submission), is the same corpus."""
    def corpus(folder: str, lines: list[str]) -> Path:
        path = tmp_path / folder / "corpus.jsonl"
        path.parent.mkdir()
        path.write_text("".join(lines), encoding="utf-8")
        return path

    index = tmp_path / "idx"
    first = ingest(corpus("a", _lines(20)), index, shard_size=10, executor="local", chunk=CHUNK, progress=False)
    moved = corpus("b", _lines(30))  # moved, with ten documents appended
    second = ingest(moved, index, shard_size=10, executor="local", chunk=CHUNK, progress=False)
    assert (second.shards_skipped, second.shards_written, second.docs) == (2, 1, 10)
    assert second.chunks_embedded == second.chunks
    again = ingest(moved, index, shard_size=10, executor="local", chunk=CHUNK, progress=False)
    assert (again.shards_skipped, again.shards_written) == (3, 0)
    other = ingest(corpus("c", _lines(40)[30:]), index, shard_size=10, executor="local", chunk=CHUNK,
                   progress=False)  # other documents there: a second corpus, with shards of its own
    assert (other.shards_skipped, other.shards_written, other.docs) == (0, 1, 10)
    assert len(committed_docnos(index)) == first.chunks + second.chunks + other.chunks
    retitled = [json.dumps({**json.loads(line), "title": "Retitled"}) + "\n" for line in _lines(30)]
    replaced = ingest(corpus("d", retitled), index, shard_size=10, executor="local", chunk=CHUNK, progress=False,
                      replace=True)  # the same texts to replace what the index holds: ingested, not resumed
    assert (replaced.shards_skipped, replaced.shards_written, replaced.docs) == (0, 3, 30)
    titles = set(Index.open(index).columns(["doc_id", "title"])[1].column("title").to_pylist())
    assert "Retitled" in titles


def test_changed_settings_shard_size_or_source_are_refused(tmp_path, corpus30, caplog):
    ingest(corpus30, tmp_path / "idx", settings=BM25_ONLY, shard_size=10, executor="local", progress=False)
    with pytest.raises(IndexExistsError, match="other settings"):
        ingest(corpus30, tmp_path / "idx", settings={"stemmer": None}, shard_size=10, executor="local",
               progress=False)
    with pytest.raises(SettingsMismatchError, match="shard_size=10"):
        ingest(corpus30, tmp_path / "idx", shard_size=7, executor="local", progress=False)
    with caplog.at_level(logging.WARNING, logger="flows"):  # all done: nothing is made with other params
        done = ingest(corpus30, tmp_path / "idx", shard_size=10, executor="local", chunk=CHUNK, progress=False)
    assert (done.shards_skipped, done.shards_written) == (3, 0)
    said = [r for r in caplog.records if "other chunk/enrich/embed params" in r.getMessage()]
    assert len(said) == 1 and getattr(said[0], "note", False) and "'chunk': (None, {" in said[0].getMessage()
    corpus30.write_text("".join(_lines(40)), encoding="utf-8")  # grown: a shard to make, with other params
    with pytest.raises(SettingsMismatchError, match="chunk") as refused:
        ingest(corpus30, tmp_path / "idx", shard_size=10, executor="local", chunk=CHUNK, progress=False)
    assert len(Index.open(tmp_path / "idx").columns(["doc_id"])[1]) == 30  # refused before any commit
    # the refusal names the command that resumes with the finished shards' params (an ingestion an older release
    # began, whose default chunking has changed since, resumes so), and that command resumes it
    resume = re.search(r"resume with the same ones \((tessera ingest .*) does, as tessera index info says\)",
                       refused.value.message)
    assert resume, refused.value.message
    assert resume.group(1) == pending.unfinished(tmp_path / "idx")[0]["resume"]
    from flows.commands import main

    assert main(shlex.split(resume.group(1))[1:]) == 0
    assert len(set(Index.open(tmp_path / "idx").columns(["doc_id"])[1].column("doc_id").to_pylist())) == 40
    lines = _lines(30)
    lines[3] = lines[3].replace('"text": "', '"text": "EDITED ')
    corpus30.write_text("".join(lines), encoding="utf-8")
    from flows.ingestion.errors import SourceChangedError

    with pytest.raises(SourceChangedError, match="-00000"):
        ingest(corpus30, tmp_path / "idx", shard_size=10, executor="local", progress=False)


def test_unreadable_record_goes_to_the_ledger_and_retry_reads_it_again(tmp_path, committed_docnos):
    lines = _lines(25)
    good = lines[6]
    lines[6] = '{"_id": "broken", "text": \n'  # line 7: not JSON
    source = tmp_path / "corpus.jsonl"
    source.write_text("".join(lines), encoding="utf-8")
    report = ingest(source, tmp_path / "idx", settings=BM25_ONLY, shard_size=10, executor="local",
                    progress=False)
    assert (report.docs, report.failures, report.open_failures) == (24, 1, 1)
    ledger = Ledger(tmp_path / "idx")
    [failure] = ledger.open_failures(Index.open(tmp_path / "idx").finished_shards())
    assert (failure.stage, failure.line, failure.raw) == ("read", 7, '{"_id": "broken", "text": ')
    assert "not valid JSON" in failure.error
    missing = json.loads(good)["_id"]
    assert missing not in committed_docnos(tmp_path / "idx")

    lines[6] = good  # fix the line, then retry only the failures
    source.write_text("".join(lines), encoding="utf-8")
    retried = ingest(None, tmp_path / "idx", retry_failed=True, executor="local", progress=False)
    assert (retried.docs, retried.resolved, retried.open_failures) == (1, 1, 0)
    assert committed_docnos(tmp_path / "idx") == sorted(json.loads(line)["_id"] for line in lines)
    nothing = ingest(None, tmp_path / "idx", retry_failed=True, executor="local", progress=False)
    assert (nothing.docs, nothing.shards_written) == (0, 0)
    resumed = ingest(source, tmp_path / "idx", settings=BM25_ONLY, shard_size=10, executor="local",
                     progress=False)  # the fixed line does not shift the finished shards
    assert (resumed.shards_skipped, resumed.shards_written, resumed.open_failures) == (3, 0, 0)


@pytest.mark.integration
def test_encoder_failure_leaves_the_document_out_whole_until_retried(tmp_path, corpus30, monkeypatch, committed_docnos):
    bad = json.loads(_lines(30)[12])["_id"]
    monkeypatch.setenv("TESSERA_FAULT", f"fail_embed:{bad}")
    report = ingest(corpus30, tmp_path / "idx", shard_size=10, executor="local", chunk=CHUNK, progress=False)
    assert (report.failures, report.open_failures) == (1, 1)
    assert not [d for d in committed_docnos(tmp_path / "idx") if d.startswith(bad + "#")]  # no chunk without a vector
    [failure] = Ledger(tmp_path / "idx").open_failures(Index.open(tmp_path / "idx").finished_shards())
    assert failure.stage == "embed" and failure.doc_id == bad and "injected encoder failure" in failure.error
    assert failure.record["text"] == json.loads(_lines(30)[12])["text"]

    monkeypatch.delenv("TESSERA_FAULT")
    retried = ingest(None, tmp_path / "idx", retry_failed=True, executor="local", progress=False)
    assert (retried.resolved, retried.open_failures) == (1, 0)
    reference = ingest(corpus30, tmp_path / "ref", settings=BM25_ONLY, shard_size=10, executor="local",
                       chunk=CHUNK, progress=False)
    assert committed_docnos(tmp_path / "idx") == committed_docnos(tmp_path / "ref") and reference.failures == 0


@pytest.mark.integration
def test_a_run_whose_every_document_fails_to_embed_exits_1(tmp_path, monkeypatch, capsys):
    """A failure after reading (the encoder's) was counted among the run's docs: '2 docs -> 0 chunks', exit 0,
    where every document failing to be read exits 1 saying no document was ingested."""
    from flows.commands import main

    source = tmp_path / "two.jsonl"
    source.write_text("".join(json.dumps({"_id": f"k{i}", "text": f"kiwi note {i}"}) + "\n" for i in (1, 2)))
    monkeypatch.setenv("TESSERA_FAULT", "fail_embed:k1,fail_embed:k2")
    capsys.readouterr()
    status = main(["ingest", "--source", str(source), "--index", str(tmp_path / "idx"), "--executor", "local",
                   "--no-chunk", "--quiet"])
    assert status == 1 and "no document was ingested: all 2 failed" in capsys.readouterr().err
    monkeypatch.setenv("TESSERA_FAULT", "fail_embed:k1")  # one of two: a run that ingested something
    assert main(["ingest", "--source", str(source), "--index", str(tmp_path / "one"), "--executor", "local",
                 "--no-chunk", "--quiet"]) == 0


def test_cli_ingests_and_resumes(tmp_path, corpus30, capsys):
    from flows.commands import main

    argv = ["ingest", "--source", str(corpus30), "--index", str(tmp_path / "idx"), "--executor", "local",
            "--no-dense", "--shard-size", "10", "--json", "--quiet"]
    assert main(argv) == 0
    first = json.loads(capsys.readouterr().out)
    assert (first["docs"], first["shards_written"], first["chunks_embedded"]) == (30, 3, 0)
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["shards_skipped"] == 3
    assert main(["ingest", "--index", str(tmp_path / "idx"), "--dense-type", "hnsw", "--source", str(corpus30),
                 "--executor", "local", "--quiet"]) == 2
    # a BM25-only index: it said "it has dense_type: flat" of an index that holds no vectors
    assert "holds no vectors (BM25 alone): dense_type does not apply to it: leave it out" in capsys.readouterr().err


def test_a_flag_that_would_leave_an_index_without_either_half_names_what_the_index_has(tmp_path, corpus30, capsys):
    """--no-bm25 into a BM25-only index said "bad index settings: Value error, an index needs dense or bm25 (both
    are false)" of the one flag given."""
    from flows.commands import main

    base = ["ingest", "--source", str(corpus30), "--index", str(tmp_path / "idx"), "--executor", "local", "--quiet"]
    assert main([*base, "--no-dense"]) == 0
    capsys.readouterr()
    assert main([*base, "--no-bm25"]) == 2
    err = capsys.readouterr().err
    assert f"the index at {tmp_path / 'idx'} has bm25: true, and this asks for bm25: false: an index needs dense or " \
        "bm25 (both are false); an index keeps the settings it was made with" in err, err
    assert "Value error" not in err


@pytest.mark.parametrize("base, given, field, message", [
    ({}, {"k1": "abc"}, "settings.k1", "must be a number (got 'abc')"),
    ({}, {"dim": "x"}, "settings.dim", "must be a whole number (got 'x')"),
    ({}, {"bm25_k1": 1}, "settings.bm25_k1", "unknown index setting 'bm25_k1'; did you mean 'bm25' or 'k1'?"),
    ({"k1": "abc"}, {"dense": False}, "index_settings.k1", "must be a number (got 'abc')"),
    ({"bm25": False}, {"dense": False}, "settings", "an index needs dense or bm25 (both are false); this asks for "
     "dense: false over the spec's index_settings"),
])
def test_bad_index_settings_are_said_as_a_specs_and_name_the_setting(tmp_path, base, given, field, message):
    """Said "bad index settings: Input should be a valid number, unable to parse string as a number", pydantic's
    words, where a spec's index_settings are told what the value must be and the value given."""
    from flows.ingestion.errors import IngestError
    from flows.ingestion.plan import index_settings

    with pytest.raises(IngestError) as caught:
        index_settings(tmp_path / "new", given, base)
    assert caught.value.field == field and caught.value.message.startswith(message), str(caught.value)
    assert "Input should" not in caught.value.message and "bad index settings" not in caught.value.message


def test_cli_refusals_name_the_options_as_typed(tmp_path, corpus30, capsys):
    from flows.commands import main

    command = ["ingest", "--source", str(corpus30), "--index", str(tmp_path / "idx"), "--executor", "local", "--quiet"]
    assert main([*command, "--no-dense", "--dense-type", "hnsw"]) == 2  # was ignored: a BM25 index was made
    assert "field '--dense-type': --no-dense and --dense-type together" in capsys.readouterr().err
    assert main([*command, "--no-dense", "--no-bm25"]) == 2
    assert "field '--no-bm25': --no-dense and --no-bm25 together" in capsys.readouterr().err
    assert not (tmp_path / "idx").exists()
    assert main([*command, "--no-dense", "--shard-size", "10"]) == 0
    capsys.readouterr()
    assert main([*command, "--no-dense", "--shard-size", "7"]) == 2
    err = capsys.readouterr().err
    assert "field '--shard-size': this source was ingested with --shard-size 10 (3 shard(s) finished); use " \
           "--shard-size 10 to resume" in err and "shard_size" not in err  # the Python call's own: shard_size=10


def test_built_in_spec_validates():
    flow, settings = load_spec("ingest")
    assert list(flow.steps) == ["read", "chunk", "embed"]
    from operators.store import IndexSettings

    assert IndexSettings.model_validate(settings).dense_type == "flat"


def test_nothing_is_created_until_source_settings_and_encoder_are_checked(tmp_path, corpus30, capsys, monkeypatch):
    from flows.commands import main
    from flows.ingestion.errors import IngestError

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))  # no trained models
    idx = tmp_path / "idx"
    command = ["ingest", "--index", str(idx), "--executor", "local", "--quiet"]
    assert main([*command, "--source", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err
    spec = tmp_path / "spec.yaml"
    spec.write_text("steps:\n  read: {op: sources.jsonl, params: {path: x.jsonl}}\n  embed: {op: embed, params: "
                    "{model: all-mpnet-base-v2}}\nindex_settings: {encoder: all-MiniLM-L6-v2}\n", encoding="utf-8")
    assert main([*command, "--source", str(corpus30), "--spec", str(spec)]) == 2
    assert "is not the index's encoder" in capsys.readouterr().err
    spec.write_text("steps:\n  read: {op: sources.jsonl, params: {path: x.jsonl}}\n  embed: {op: embed}\n"
                    "index_settings: {encoder: tessera-bi-encoder}\n", encoding="utf-8")
    assert main([*command, "--source", str(corpus30), "--spec", str(spec)]) == 2
    assert "'tessera-bi-encoder'" in capsys.readouterr().err
    assert main([*command, "--source", str(corpus30), "--spec", "ingest_static"]) == 2  # it said "(tessera train)"
    assert "'tessera-static'" in (err := capsys.readouterr().err) and "tessera train --model static" in err, err
    from flows.api import ingest as python_ingest
    from flows.model_check import MissingModelsError

    with pytest.raises(MissingModelsError, match="make it with: tessera train --model static"):
        python_ingest(corpus30, idx, spec="ingest_static", progress=False)
    with pytest.raises(IngestError, match="shard_size"):
        ingest(corpus30, idx, shard_size=0, executor="local", progress=False)
    assert not idx.exists() and not (tmp_path / "home" / "indices").exists()


def test_another_encoder_for_an_existing_index_is_refused_with_advice_that_can_work(tmp_path, corpus30, capsys):
    """An existing index keeps its encoder, so "set index_settings.encoder" (the advice for a new one) cannot help:
    the spec the user ran (ingest_static) already set it."""
    from flows.commands import main
    from operators.store import Index

    idx = tmp_path / "minilm_index"
    Index.create(idx, {"encoder": "all-MiniLM-L6-v2", "dim": 384})
    assert main(["ingest", "--index", str(idx), "--spec", "ingest_static", "--source", str(corpus30),
                 "--executor", "local", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "the embed step's model 'tessera-static' is not the index's encoder 'all-MiniLM-L6-v2'" in err
    assert "keeps its encoder" in err and "ingest into a new index" in err and "set index_settings" not in err
    assert len(Index.open(idx)) == 0


def test_a_shard_whose_commit_fails_is_removed(tmp_path, corpus30):
    from operators.store import CommitError

    ingest(corpus30, tmp_path / "idx", settings=BM25_ONLY, shard_size=10, executor="local", progress=False)
    copy = tmp_path / "copy.jsonl"  # another source (other texts, so other shard ids) with the same document ids
    copy.write_text(corpus30.read_text(encoding="utf-8").replace('"text": "', '"text": "EDITED '), encoding="utf-8")
    with pytest.raises(CommitError, match="already live"):
        ingest(copy, tmp_path / "idx", shard_size=10, executor="local", progress=False)
    index = Index.open(tmp_path / "idx")
    assert index.uncommitted() == [] and len(index.finished_shards()) == 3


@pytest.mark.integration
def test_progress_counts_documents_as_they_are_embedded(tmp_path, corpus30):
    """A shard of thousands of documents takes minutes to embed: the bar must move during it,
    not only when the shard commits (it sat at 0/5.00k for 21 minutes and looked hung). On Ray:
    ``test_ray_and_local_build_the_same_dense_index``."""
    embed = {"op": "embed.sentence_transformer", "params": {"title_column": "title"},
             "batch_size": 4}  # four encoder calls per shard of 15
    spec = {"name": "ingest", "steps": {"read": {"op": "sources.jsonl", "params": {"path": "unused.jsonl"}},
                                        "embed": embed}}
    events = []
    report = ingest(corpus30, tmp_path / "idx", shard_size=15, executor="local", spec=spec, progress=False,
                    on_progress=events.append)
    assert report.docs == 30 and report.shards_written == 2
    ingesting = [e for e in events if e.stage == "ingest"]
    first_commit = next(i for i, e in enumerate(ingesting) if e.shards)
    counted = [e.docs for e in ingesting[:first_commit]]
    assert counted and max(counted) > 0, counted  # counted while the first shard was embedded
    # one update per encoder batch; the second shard may be embedding (in a thread) while the first is written
    assert counted[:5] == [0, 4, 8, 12, 15] and counted[5:] == [19, 23, 27, 30][:len(counted) - 5], counted
    assert [e.docs for e in ingesting] == sorted(e.docs for e in ingesting)  # never counted twice
    assert (ingesting[-1].docs, ingesting[-1].docs_total, ingesting[-1].shards) == (30, 30, 2)
    assert [e.docs for e in events if e.stage == "staging"][-1] == 30
    # in the same events, the chunks given their vectors, of those of the shards chunked so far (a document of
    # thousands of chunks, counted after its first encoder call, moves by these)
    assert [e.chunks for e in ingesting] == sorted(e.chunks for e in ingesting)
    assert ingesting[-1].chunks == ingesting[-1].chunks_total == report.chunks_embedded
