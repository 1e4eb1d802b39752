"""A relative index path or corpus file means the same folder on both executors: the one the flow is run from.

Ray's workers work in the folder the Ray was started from (here the repository root, where this session's Ray
began); the test then runs its flows from a folder of its own, as a user's shell after ``ray start`` elsewhere.
Before the driver resolved them (``flows/executors/driver_paths.py``), the Ray executor looked for them there."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from flows.executors.driver_paths import absolute_paths
from flows.executors.local import LocalExecutor
from flows.spec import FlowSpec
from operators.registry import get_operator

QUERIES = pa.table({"qid": ["1", "2"], "query": ["which insects make honey", "gothic cathedrals"]})


def test_only_relative_paths_found_here_are_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs.jsonl").write_text("{}\n")
    bm25, corpus = get_operator("retrieve.bm25"), get_operator("retrieve.corpus_bm25")
    assert absolute_paths(bm25, {"index": "./idx"})["index"] == str(tmp_path / "idx")
    assert absolute_paths(bm25, {"index": "sample"}) == {"index": "sample"}  # a name: $TESSERA_HOME's, anywhere
    assert absolute_paths(corpus, {"corpus": "docs.jsonl"})["corpus"] == str(tmp_path / "docs.jsonl")
    assert absolute_paths(corpus, {"corpus": "*.jsonl"})["corpus"] == str(tmp_path / "*.jsonl")
    assert absolute_paths(corpus, {"corpus": "nowhere.jsonl"}) == {"corpus": "nowhere.jsonl"}  # the worker looks


@pytest.mark.ray
def test_a_relative_index_and_corpus_are_the_callers_on_ray_as_locally(sample_index, tmp_path, monkeypatch,
                                                                       ray_session):
    from flows.executors.ray_data import RayDataExecutor

    monkeypatch.chdir(tmp_path)
    (tmp_path / "idx").symlink_to(sample_index, target_is_directory=True)
    (tmp_path / "docs.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": text}) + "\n" for i, text in
                                                 enumerate(["Honey bees make honey.", "A gothic cathedral's vault."])))
    spec = FlowSpec.parse({"name": "relative", "steps": {
        "index": {"op": "retrieve.bm25", "params": {"index": "./idx", "k": 5}},
        "corpus": {"op": "retrieve.corpus_bm25", "params": {"corpus": "docs.jsonl", "k": 2}, "inputs": []},
        "both": {"op": "fuse.rrf", "inputs": ["index", "corpus"]}}, "output": "both"})
    local = LocalExecutor(cache=None).run(spec.build(), QUERIES).table
    on_ray = RayDataExecutor(cache=None).run(spec.build(), QUERIES).table
    docnos = set(local.column("docno").to_pylist())
    assert {"d0", "d1"} <= docnos and any(d.startswith("wv") for d in docnos)  # the corpus's and the index's
    assert on_ray.select(["qid", "docno"]).equals(local.select(["qid", "docno"]))


@pytest.mark.ray
def test_a_relative_source_file_is_read_on_ray_as_locally(tmp_path, monkeypatch, ray_session):
    """The source's splits are computed on the driver and shipped: they name the file by its absolute path."""
    from flows.executors.ray_data import RayDataExecutor

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mini.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": text}) + "\n" for i, text in
                                                 enumerate(["Honey bees make honey.", "A gothic cathedral's vault."])))
    spec = FlowSpec.parse({"name": "src", "steps": {
        "read": {"op": "sources.jsonl", "params": {"path": "mini.jsonl"}},
        "wc": {"op": "analyze.word_count", "params": {"input_column": "text"}}}})
    local = LocalExecutor(cache=None).run(spec.build()).table
    for keep_history in (True, False):  # its own stage, and fused with the row step after it
        assert RayDataExecutor(cache=None, keep_history=keep_history).run(spec.build()).table.equals(local)
