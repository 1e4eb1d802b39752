"""Paths a cluster can share (``flows.uris``): ``file://`` as the local path, remote files and folders through a
pyarrow filesystem (pyarrow's in-memory one stands in for S3/GCS, which this machine cannot reach), and one clear
error for a scheme Tessera does not read."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest

from flows import uris
from operators.errors import SpecError


def test_a_file_uri_is_its_local_path(tmp_path):
    folder = tmp_path.as_uri()  # a URI's path percent-encoded, where the folder's name holds a space or an ë
    with uris.local_input(f"{folder}/q.jsonl", "queries") as path:
        assert path == f"{tmp_path}/q.jsonl"
    with uris.local_output(f"{folder}/r.parquet", "out") as path:
        assert path == f"{tmp_path}/r.parquet"
    assert uris.local_path(f"{folder}/idx", "index") == f"{tmp_path}/idx"
    with uris.local_input("data/sample/queries.jsonl", "queries") as path:  # a plain path is left alone
        assert path == "data/sample/queries.jsonl"


@pytest.mark.parametrize("value", ["ftp://host/r.parquet", "http://host/r.parquet", "hdfs://nn/r.parquet"])
def test_an_unsupported_scheme_names_the_field_and_what_works(value):
    with pytest.raises(SpecError) as caught:
        uris.check_scheme(value, "out")
    assert caught.value.field == "out" and "file://, s3:// or gs://" in str(caught.value)


def test_an_index_must_be_a_local_or_mounted_folder():
    with pytest.raises(SpecError, match="must be a local or mounted path") as caught:
        uris.local_path("s3://bucket/indices/sample", "index")
    assert caught.value.field == "index"


def test_a_remote_file_and_folder_are_fetched_and_an_output_is_copied_up_whole():
    remote = pafs._MockFileSystem()
    remote.create_dir("bucket/data/beir/qrels")
    with remote.open_output_stream("bucket/data/q.jsonl") as f:
        f.write(b'{"_id": "q1", "text": "honey bees"}\n')
    with remote.open_output_stream("bucket/data/beir/qrels/test.tsv") as f:
        f.write(b"query-id\tcorpus-id\tscore\n")
    with uris.fetched(remote, "bucket/data/q.jsonl", label="--queries", field="queries") as path:
        assert open(path, encoding="utf-8").read().startswith('{"_id": "q1"')
    with uris.fetched(remote, "bucket/data/beir", label="--dataset", field="dataset") as path:
        assert open(f"{path}/qrels/test.tsv", encoding="utf-8").read().startswith("query-id")
    with pytest.raises(SpecError, match="does not exist"):
        with uris.fetched(remote, "bucket/none.jsonl", label="--queries 's3://bucket/none.jsonl'", field="queries"):
            pass

    with uris.pushed(remote, "bucket/out/r.parquet") as path:
        pq.write_table(pa.table({"qid": ["q1"]}), path)
        assert remote.get_file_info("bucket/out/r.parquet").type == pafs.FileType.NotFound  # not before the end
    with remote.open_input_file("bucket/out/r.parquet") as f:
        assert pq.read_table(f).column("qid").to_pylist() == ["q1"]
    with uris.pushed(remote, "bucket/out/bench") as path:
        import os

        os.makedirs(f"{path}/runs")
        open(f"{path}/report.md", "w").write("# report")
        open(f"{path}/runs/bm25.parquet", "wb").write(b"x")
    assert remote.get_file_info("bucket/out/bench/report.md").size == 8
    assert remote.get_file_info("bucket/out/bench/runs/bm25.parquet").type == pafs.FileType.File


def test_the_cli_refuses_an_unsupported_scheme_before_anything_runs(run_cli):
    status, _ = run_cli("run", "bm25", "--index", "nowhere", "--queries", "honey", "--out", "ftp://host/r.parquet")
    assert status == 2


def test_a_glob_in_a_source_uri_is_refused_as_a_glob_not_as_no_file_matching(tmp_path, monkeypatch, capsys):
    """``--source "file:///data/corpus*.jsonl"``: a URI names one file or folder, and the glob was read as a file of
    that name, "no file matches" where one did. Refused before anything runs, with what works."""
    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    (tmp_path / "corpusA.jsonl").write_text('{"_id": "a", "text": "honey bees"}\n')
    index = tmp_path / "idx"
    folder = tmp_path.as_uri()
    status = main(["ingest", "--source", f"{folder}/corpus*.jsonl", "--index", str(index), "--no-dense"])
    err = capsys.readouterr().err
    assert status == 2 and "a URI names one file or folder, not a glob" in err and f"({folder}/)" in err
    assert not index.exists()
    assert main(["ingest", "--source", f"{folder}/", "--index", str(index), "--no-dense", "--quiet"]) == 0
