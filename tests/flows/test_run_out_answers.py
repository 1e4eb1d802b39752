"""``tessera run --out`` keeps a RAG flow's answers: the rows file holds documents, and the answers, sources and usage
(the queries' metadata) go beside it as ``NAME.queries.jsonl``. The model is the local fault server (a real HTTP
server answering as an OpenAI-compatible one)."""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from tests.flows.test_rag_flow import CORPUS, answer_spec


def _queries(tmp_path, name="q.txt"):
    path = tmp_path / name
    path.write_text("what do bees make honey from\nwhat is an opera\n", encoding="utf-8")
    return str(path)


def test_the_answers_of_a_run_written_to_a_file_go_beside_it(fault_models, tmp_path, run_cli, capsys):
    out = tmp_path / "results.parquet"
    status, printed = run_cli("run", answer_spec(tmp_path, "fault-ok"), "--queries", _queries(tmp_path),
                              "--out", str(out), "--no-cache")
    assert status == 0, printed
    assert set(pq.read_table(out).column("qid").to_pylist()) == {"1", "2"}  # the rows: documents
    lines = [json.loads(line) for line in (tmp_path / "results.queries.jsonl").read_text().splitlines()]
    assert [(a["qid"], a["query"]) for a in lines] == [("1", "what do bees make honey from"),
                                                        ("2", "what is an opera")]
    assert all(a["answer"] == "Honey bees make honey [1]." for a in lines), lines
    assert lines[0]["sources"] == [CORPUS[0]["_id"]] and lines[0]["references"] == ["[1] Bee (d1)"]
    assert lines[0]["usage"]["answer"]["completion_tokens"] > 0


def test_json_names_the_answers_file_and_a_flow_without_answers_writes_none(fault_models, tmp_path, run_cli):
    out = tmp_path / "run.jsonl"
    status, printed = run_cli("run", answer_spec(tmp_path, "fault-ok"), "--queries", _queries(tmp_path),
                              "--out", str(out), "--no-cache", "--json", "--top", "1")
    assert status == 0, printed
    assert json.loads(printed)["out"]["answers"] == {"path": str(tmp_path / "run.queries.jsonl"), "queries": 2}

    spec = tmp_path / "bm25.json"  # retrieval alone: no query metadata, no second file
    spec.write_text(json.dumps({"name": "bm25", "steps": {"bm25": {"op": "retrieve.corpus_bm25", "params": {
        "corpus": str(tmp_path / "corpus.jsonl"), "k": 2}}}}))
    status, printed = run_cli("run", str(spec), "--queries", _queries(tmp_path), "--out", str(tmp_path / "b.parquet"),
                              "--no-cache")
    assert status == 0 and not (tmp_path / "b.queries.jsonl").exists(), printed


def test_an_out_whose_answers_file_is_the_queries_file_is_refused_before_the_run(fault_models, tmp_path, monkeypatch,
                                                                                capsys):
    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    queries = tmp_path / "ask.queries.jsonl"
    queries.write_text('{"_id": "q1", "text": "what do bees make honey from"}\n', encoding="utf-8")
    before = queries.read_bytes()
    status = main(["run", answer_spec(tmp_path, "fault-ok"), "--queries", str(queries),
                   "--out", str(tmp_path / "ask.parquet"), "--no-cache"])
    err = capsys.readouterr().err
    assert status == 2 and "field '--out'" in err and "the --queries file" in err, err
    assert queries.read_bytes() == before and not (tmp_path / "ask.parquet").exists()
    assert fault_models.attempts["ok"] == 0  # refused before the model was asked


def test_the_line_saying_where_the_answers_went_has_the_right_possessive(fault_models, tmp_path, monkeypatch,
                                                                          capsys):
    """It said "and 1 query' answers and metadata to ..."."""
    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    spec = answer_spec(tmp_path, "fault-ok")
    for queries, said in (("what do bees make honey from", "1 query's"), (_queries(tmp_path), "2 queries'")):
        out = tmp_path / f"{said[0]}.parquet"
        assert main(["run", spec, "--queries", queries, "--out", str(out), "--no-cache"]) == 0
        err = capsys.readouterr().err
        assert f"and {said} answers and metadata to {tmp_path / said[0]}.queries.jsonl" in err, err


def test_a_query_that_found_nothing_has_its_line_too(fault_models, tmp_path, run_cli):
    """A question retrieval found nothing for had no line, though the file promises one a query; it has its line,
    with generate.answer's decline (no model call) since the answer step declares one for a query it never saw."""
    queries = tmp_path / "q.txt"
    queries.write_text("zzzzqqq xyxyxy\nwhat do bees make honey from\n", encoding="utf-8")
    out = tmp_path / "results.parquet"
    status, printed = run_cli("run", answer_spec(tmp_path, "fault-ok"), "--queries", str(queries), "--out", str(out),
                              "--no-cache")
    assert status == 0, printed
    lines = [json.loads(line) for line in (tmp_path / "results.queries.jsonl").read_text().splitlines()]
    assert lines[0]["qid"] == "1" and lines[0]["query"] == "zzzzqqq xyxyxy"  # declined without the model:
    assert lines[0]["documents"] == 0 and lines[0]["abstained"] is True and lines[0]["sources"] == []
    assert lines[1]["qid"] == "2" and lines[1]["answer"] == "Honey bees make honey [1]."
