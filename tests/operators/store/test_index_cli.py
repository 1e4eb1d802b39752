"""``tessera index info/add/update/delete`` through flows.commands.main."""

from __future__ import annotations

import json

import pytest

from flows.commands import main
from operators.store import Index


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
    assert "3 tombstone(s), 38 live" in capsys.readouterr().out


def test_errors_are_one_line_with_exit_status_2(tmp_path, capsys):
    assert main(["index", "info", str(tmp_path / "nothing")]) == 2
    assert "no index at" in capsys.readouterr().err
    assert main(["index", "add", str(tmp_path / "i"), str(tmp_path / "missing.jsonl"), "--no-dense"]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.slow
def test_add_embeds_with_the_index_encoder(tmp_path, sample_docs):
    idx = str(tmp_path / "dense")
    assert main(["index", "add", idx, _write(tmp_path / "a.jsonl", sample_docs[:8])]) == 0
    from operators.models import load_sentence_transformer

    query = load_sentence_transformer("all-MiniLM-L6-v2").encode(["Bee honey insects"], normalize_embeddings=True)
    index = Index.open(idx)
    assert index.settings.dense and len(index) == 8
    hits = index.search_dense(query, k=8)[0]
    assert len(hits) == 8 and 0 < hits.scores[0] <= 1.0001
