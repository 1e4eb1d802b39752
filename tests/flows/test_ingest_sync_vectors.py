"""A sync encodes only the text that changed: the chunks of the documents it ingests again whose text the index
holds take their vectors from the index (``flows.ingestion.reuse``), on both executors, and the index comes out as
a fresh ingest of the changed folder would make it. Real files, the packaged MiniLM, real FAISS shards."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from flows.commands import main
from flows.ingestion import ingest
from operators.store import Index
from operators.store import shard as shard_io

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample" / "corpus.jsonl"
CHUNK = {"unit": "tokens", "size": 48, "overlap": 8}
TESSERA = Path(sys.executable).with_name("tessera")
pytestmark = pytest.mark.integration  # MiniLM encodes


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    """Eight Markdown files of the sample corpus, several 48-token chunks each."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    folder = tmp_path / "notes"
    folder.mkdir()
    for i, line in enumerate(SAMPLE.read_text(encoding="utf-8").splitlines()[:8]):
        doc = json.loads(line)
        (folder / f"n{i}.md").write_text(f"# {doc['title']}\n\n{doc['text']}\n", encoding="utf-8")
    return folder


def run(folder: Path, index: Path, executor: str = "local", **options):
    return ingest(folder, index, shard_size=2, executor=executor, chunk=CHUNK, progress=False, **options)


def live_vectors(index: Path) -> dict[str, np.ndarray]:
    """Each live chunk's id and vector, read from the shards' FAISS files."""
    return shard_io.live_vectors(index / "shards", Index.open(index).manifest)


def chunks_of(index: Path, doc_id: str) -> int:
    return sum(1 for docno in live_vectors(index) if docno.startswith(f"{doc_id}#"))


def test_a_sync_encodes_only_the_changed_chunks_and_the_index_is_as_a_fresh_ingest_makes_it(tmp_path, folder,
                                                                                           executor_kind):
    index = tmp_path / "idx"
    first = run(folder, index)
    n0, n5 = chunks_of(index, "n0.md"), chunks_of(index, "n5.md")
    assert first.chunks_embedded == first.chunks and n0 > 1 and n5 > 2
    (folder / "n0.md").unlink()  # every later document moves to another shard: all of them are staged again
    n5_text = (folder / "n5.md").read_text(encoding="utf-8")
    (folder / "n5.md").write_text(n5_text + "\nKiwi are flightless birds that probe the forest floor.\n",
                                  encoding="utf-8")  # its last chunk changes, the ones before it do not

    report = run(folder, index, executor_kind, sync=True)
    assert report.docs == 7 and report.docs_deleted == 1
    assert 1 <= report.chunks_embedded <= 2, report  # n5's end (the chunk overlapping it may change too)
    assert report.chunks_reused + report.chunks_embedded == report.chunks >= first.chunks - n0, report
    assert not list((index / "_ingest").glob("*/reuse.parquet"))  # the sync's list goes with its end

    fresh = run(folder, tmp_path / "fresh")
    synced, expected = live_vectors(index), live_vectors(tmp_path / "fresh")
    assert sorted(synced) == sorted(expected)
    assert max(float(np.abs(synced[k] - expected[k]).max()) for k in expected) < 1e-4
    assert fresh.chunks_embedded == fresh.chunks == report.chunks
    last = max((d for d in synced if d.startswith("n5.md#")), key=lambda d: int(d.split("#")[1]))
    assert Index.open(index).search_dense(synced[last][None, :], k=1)[0].docnos == [last]


def test_an_interrupted_sync_resumed_after_a_compaction_still_keeps_the_unchanged_vectors(tmp_path, folder, capsys):
    index = tmp_path / "idx"
    args = ["ingest", "--source", str(folder), "--index", str(index), "--executor", "local", "--quiet",
            "--shard-size", "2", "--sync"]
    assert main(args[:-1]) == 0
    key = next((index / "_ingest").iterdir()).name
    (folder / "n1.md").write_text("# Kiwi\n\nKiwi are flightless birds of New Zealand.\n", encoding="utf-8")
    crashed = subprocess.run([str(TESSERA), *args], capture_output=True, text=True, timeout=300,
                             env={**os.environ, "TESSERA_FAULT": f"crash_after_write:{key}-00001r1",
                                  "TESSERA_HOME": str(tmp_path / "home")})
    assert crashed.returncode == 75, crashed.stderr
    Index.open(index).compact()  # the retired shards' folders are merged into one: the list is made again from it
    made = {info.embedded_as for info in Index.open(index).manifest.shards}
    assert len(made) == 1 and None not in made  # how the merged vectors were made, kept by the compaction

    capsys.readouterr()
    assert main(args) == 0
    out = capsys.readouterr().out
    reused, embedded = (int(n) for n in out.split("kept: the vectors of ")[1].split(" embedded)")[0].split(
        " passage(s) whose text did not change ("))
    assert reused > 0 and embedded == 0, out  # n1's shard was committed before the crash: the rest are as they were
    fresh = tmp_path / "fresh"
    assert main([*args[:4], str(fresh), *args[5:-1]]) == 0
    synced, expected = live_vectors(index), live_vectors(fresh)
    assert sorted(synced) == sorted(expected)
    assert max(float(np.abs(synced[k] - expected[k]).max()) for k in expected) < 1e-4


def test_documents_replaced_by_id_keep_the_vectors_of_their_unchanged_chunks(tmp_path, monkeypatch):
    """``--replace`` (and the service's upload of a file again, which replaces its documents): an edited copy of a
    long document encodes the chunks that changed, not the document."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    docs = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()[:3]]
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    options = dict(shard_size=10, executor="local", chunk=CHUNK, progress=False)
    first = ingest(source, tmp_path / "idx", **options)
    docs[1] = {**docs[1], "text": docs[1]["text"] + " Kiwi are flightless birds that probe the forest floor."}
    edited = tmp_path / "edited.jsonl"
    edited.write_text("".join(json.dumps(d) + "\n" for d in docs[1:2]), encoding="utf-8")

    report = ingest(edited, tmp_path / "idx", replace=True, **options)
    assert 1 <= report.chunks_embedded <= 2 and report.chunks_reused == report.chunks - report.chunks_embedded > 1
    source.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    ingest(source, tmp_path / "fresh", **options)
    synced, expected = live_vectors(tmp_path / "idx"), live_vectors(tmp_path / "fresh")
    assert sorted(synced) == sorted(expected) and len(synced) >= first.chunks
    assert max(float(np.abs(synced[k] - expected[k]).max()) for k in expected) < 1e-4
    assert not list((tmp_path / "idx" / "_ingest").glob("*/reuse.parquet"))


PROMPTED = """name: prompted
steps:
  read: {op: sources.jsonl, params: {path: data/sample/corpus.jsonl}}
  chunk: {op: preprocess.chunk, params: {unit: tokens, size: 48, overlap: 8}}
  embed: {op: embed.sentence_transformer, params: {prompt: "passage: "}}
index_settings: {encoder: all-MiniLM-L6-v2}
"""


def test_vectors_made_from_other_strings_are_never_taken(tmp_path, monkeypatch):
    """A source embedded with a prompt and without titles, then its documents replaced by a source embedded with
    titles (the default): the same text was given to the encoder as another string, so it is encoded again; the
    default source's own vectors are taken by a third source alike."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    spec = tmp_path / "prompted.yaml"
    spec.write_text(PROMPTED, encoding="utf-8")
    docs = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()[:4]]
    files = {}
    for name in ("a", "b", "c"):
        files[name] = tmp_path / f"{name}.jsonl"
        files[name].write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    options = dict(shard_size=10, executor="local", chunk=CHUNK, progress=False)
    ingest(files["a"], tmp_path / "idx", spec=str(spec), shard_size=10, executor="local", progress=False)

    other_way = ingest(files["b"], tmp_path / "idx", replace=True, **options)
    assert other_way.chunks_reused == 0 and other_way.chunks_embedded == other_way.chunks > 4, other_way
    ingest(files["b"], tmp_path / "fresh", **options)
    synced, expected = live_vectors(tmp_path / "idx"), live_vectors(tmp_path / "fresh")
    assert sorted(synced) == sorted(expected)
    assert max(float(np.abs(synced[k] - expected[k]).max()) for k in expected) < 1e-4

    alike = ingest(files["c"], tmp_path / "idx", replace=True, **options)
    assert alike.chunks_reused == alike.chunks and alike.chunks_embedded == 0, alike
    assert max(float(np.abs(v - expected[k]).max()) for k, v in live_vectors(tmp_path / "idx").items()) < 1e-4


def test_an_embed_step_whose_chunks_are_all_kept_loads_no_model(tmp_path, folder):
    """A sync that removed a file (nothing to encode) took seconds to load the encoder for no forward pass."""
    import pyarrow as pa

    from flows.ingestion import reuse
    from flows.ingestion.embedder import Embedder
    from flows.ingestion.shards import ShardJob

    index = tmp_path / "idx"
    run(folder, index)
    staging = next((index / "_ingest").iterdir())
    embed = json.loads((staging / "job.json").read_text())["embed"]
    passages = Index.open(index).columns(["docno", "doc_id", "title", "text"])[1]
    n = passages.num_rows
    rows = passages.append_column("_error", pa.nulls(n, pa.string())).append_column(
        "_stage", pa.nulls(n, pa.string())).append_column("_shard", pa.array(["s"] * n))
    job = ShardJob(index_path=str(index), chunk=CHUNK, embed=embed,
                   reuse=reuse.write(index, staging, set(passages.column("doc_id").to_pylist()), embed))
    embedder = Embedder(job)
    out, encoded, kept = embedder(rows)
    assert (encoded, kept) == (0, n) and not embedder.op._is_set_up  # no model was loaded
    stored = live_vectors(index)
    for docno, vector in zip(out.column("docno").to_pylist(), out.column("vector").to_pylist()):
        assert np.array_equal(np.asarray(vector, dtype=np.float32), stored[docno])


def test_the_replaced_ids_skip_a_staged_file_another_ingest_finished_meanwhile(tmp_path):
    """Two ingests of one source with --replace: the one that commits a shard first deletes its staged file, which
    the other then lists as replaced (it failed with FileNotFoundError)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from flows.ingestion.reuse import replaced_ids

    pq.write_table(pa.table({"docno": ["a", "b"], "text": ["x", "y"]}), tmp_path / "k-00000.parquet")
    assert replaced_ids([tmp_path / "k-00000.parquet", tmp_path / "k-00001.parquet"]) == {"a", "b"}
