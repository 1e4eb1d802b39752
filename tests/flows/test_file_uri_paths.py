"""A ``file://`` URI names the local path written after it, whatever the folders' names: pyarrow's parser refused a
space or an ``ë`` ("syntax error at character"), and ended the path at a ``#`` or ``?`` without a word, so
``--out 'file:///data/run #1/r.jsonl'`` was written to ``/data/run ``; a ``--queries`` URI with a space was
searched as one query's text. ``%XX`` is decoded, as ``Path.as_uri()`` writes it."""

from __future__ import annotations

import json

from flows.commands import main
from operators.store import Index


def test_ingest_and_run_read_and_write_where_their_file_uris_say(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    folder = tmp_path / "Zoë Smith #1 ?x"
    folder.mkdir()
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": f"d{i}", "text": f"honey bees {i}"}) + "\n"
                                                 for i in range(3)))
    (folder / "q.jsonl").write_text(json.dumps({"_id": "q1", "text": "honey bees"}) + "\n")
    uri = f"file://{folder}"
    assert main(["ingest", "--source", f"{uri}/corpus.jsonl", "--index", f"{uri}/idx", "--no-dense",
                 "--quiet"]) == 0, capsys.readouterr().err
    assert Index.open(folder / "idx").live_doc_ids() == {"d0", "d1", "d2"}
    assert main(["run", "bm25", "--index", f"{folder.as_uri()}/idx", "--queries", f"{uri}/q.jsonl",
                 "--out", f"{uri}/r.jsonl", "--quiet", "--no-cache"]) == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in (folder / "r.jsonl").read_text().splitlines()]
    assert {row["qid"] for row in rows} == {"q1"} and len(rows) == 3
    assert [p.name for p in tmp_path.iterdir() if p.name != "home"] == [folder.name]  # nothing beside it
