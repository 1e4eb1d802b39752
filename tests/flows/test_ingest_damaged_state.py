"""A source's staging state damaged (``state.json``, ``job.json`` cut short or overwritten): the next ingest was an
internal error, ``JSONDecodeError`` naming no file. It is one line naming the file and saying to delete it; the run
after that reads the source again and finds its finished shards, ingesting nothing twice."""

from __future__ import annotations

import json
import os

import pytest

from flows.ingestion import ingest
from flows.ingestion.errors import IngestError
from operators.store import Index


@pytest.mark.parametrize("name, damage", [("state.json", b'{"trunc'), ("job.json", b"x"), ("state.json", b"[]"),
                                          ("job.json", b"\xff\xfe")])
def test_a_damaged_staging_file_is_named_and_deleting_it_resumes_without_duplicates(tmp_path, name, damage):
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"document number {i} about bees"}) + "\n"
                              for i in range(25)))
    index = tmp_path / "idx"

    def again():
        return ingest(source, index, settings={"dense": False}, executor="local", chunk=False, shard_size=10,
                      progress=False)

    assert again().docs == 25
    [staging] = [p for p in (index / "_ingest").iterdir() if p.is_dir()]
    (staging / name).write_bytes(damage)
    with pytest.raises(IngestError) as err:
        again()
    assert str(staging / name) in err.value.message and f"delete {name} there" in err.value.message
    (staging / name).unlink()
    report = again()
    assert (report.docs, report.shards_skipped) == (0, 3)
    assert Index.open(index).live_doc_ids() == {f"d{i}" for i in range(25)}


def test_a_finished_index_with_a_shard_file_missing_is_said_so_and_index_add_refuses_it(tmp_path, caplog, capsys,
                                                                                         monkeypatch):
    """Run again over a shard whose BM25 vocabulary was deleted, the ingest said "3 already done" and nothing
    else, and `tessera index add` committed into an index no search could read."""
    import logging

    from flows.commands import main

    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"document number {i} about bees"}) + "\n"
                              for i in range(25)))
    index = tmp_path / "idx"
    ingest(source, index, settings={"dense": False}, executor="local", chunk=False, shard_size=10, progress=False)
    [shard] = sorted(p for p in (index / "shards").iterdir())[:1]
    victim = next(p for p in shard.iterdir() if p.name.startswith("bm25"))
    victim.unlink()
    with caplog.at_level(logging.WARNING, logger="tessera.ingest"):
        report = ingest(source, index, settings={"dense": False}, executor="local", chunk=False, shard_size=10,
                        progress=False)
    assert report.docs == 0 and report.shards_skipped == 3
    [warning] = [r.getMessage() for r in caplog.records if "damaged shard" in r.getMessage()]
    assert f"{shard.name} ({victim.name} is missing)" in warning and "does not mend a finished shard" in warning
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"_id": "new", "text": "wasps"}) + "\n")
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    before = (index / "manifest.json").read_bytes()
    assert main(["index", "add", str(index), str(more), "--no-dense"]) == 2
    err = capsys.readouterr().err
    assert "1 damaged shard(s)" in err and "nothing was added" in err, err
    assert (index / "manifest.json").read_bytes() == before


@pytest.mark.parametrize("damaged", ["docs", "failures"])
def test_a_staged_shard_cut_short_is_staged_again_and_the_resume_finishes(tmp_path, caplog, monkeypatch, damaged):
    """A run stopped after its first commit keeps the other shards staged (``_ingest/<key>/<shard>.parquet``). One
    of them cut short (a disk that failed, a restored backup) stopped every resume with ``internal error:
    ArrowInvalid: ... Parquet magic bytes not found`` until it was found and deleted by hand. It is now named in a
    warning and staged again from the source, and the resume ingests each document once."""
    import signal

    from flows.ingestion import job

    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"document number {i} about bees"}) + "\n"
                              for i in range(25)) + "not json\n")  # a read failure, staged with the last shard
    index = tmp_path / "idx"
    real_write, calls = job.write, []

    def ctrl_c_at_the_second_write(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return real_write(*args, **kwargs)

    def again():
        return ingest(source, index, settings={"dense": False}, executor="local", chunk=False, shard_size=10,
                      progress=False)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with monkeypatch.context() as patch, pytest.raises(KeyboardInterrupt):
            patch.setattr(job, "write", ctrl_c_at_the_second_write)
            again()
    finally:
        signal.signal(signal.SIGINT, previous)
    [staging] = [p for p in (index / "_ingest").iterdir() if p.is_dir()]
    [last] = sorted(staging.glob("*-00002.parquet"))
    target = last if damaged == "docs" else last.with_name(last.name.replace(".parquet", ".failures.json"))
    target.write_bytes(target.read_bytes()[:40])
    with caplog.at_level("WARNING", logger="tessera.ingest"):
        report = again()
    assert f"{last}: a staged shard that cannot be read" in caplog.text
    assert report.shards_skipped == 1 and report.failures == 1
    assert Index.open(index).live_doc_ids() == {f"d{i}" for i in range(25)}
