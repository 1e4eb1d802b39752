"""The Python API as a notebook uses it (``flows.api``, docs/python.md): what ``Flow.run`` takes as queries,
what a missing index says to do, how timings print, and the "Evaluate a result" example, run as written."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from operators.errors import SpecError
from operators.store.errors import IndexNotFoundError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def bm25(bm25_index, tmp_path, monkeypatch):
    from flows.api import Flow

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    return Flow.load("bm25", index=bm25_index)


@pytest.mark.parametrize("given, said", [
    (5, "got int 5"),
    (b"bees", "got bytes"),
    (["bees", 7], "query 2 of 2 is 7 (int), not text: each query is the text to search for (a str)"),
])
def test_queries_that_are_not_texts_or_a_table_are_a_spec_error_saying_what_is_accepted(bm25, given, said):
    with pytest.raises(SpecError) as err:
        bm25.run(given)
    assert err.value.field == "queries" and said in err.value.message
    assert "one text, a list of texts, a pyarrow Table or pandas DataFrame with columns qid and query, or (to " \
        "Flow.run) a dict {qid: text} or of columns qid and query" in err.value.message


def test_whole_number_qids_become_strings_and_a_data_frame_is_a_queries_table(bm25):
    texts = ["gothic cathedrals", "opera singers"]
    by_number = bm25.run(pa.table({"qid": pa.array([7, 12], pa.int64()), "query": texts})).table
    assert by_number.schema.field("qid").type == pa.string()
    assert set(by_number.column("qid").to_pylist()) == {"7", "12"}
    by_text = bm25.run(pa.table({"qid": ["7", "12"], "query": texts})).table
    assert by_number.equals(by_text)
    assert bm25.run(pd.DataFrame({"qid": [7, 12], "query": texts})).table.equals(by_text)  # not its column names
    with pytest.raises(SpecError, match="column qid of the queries table must be text or whole numbers, got double"):
        bm25.run(pa.table({"qid": [1.5], "query": ["bees"]}))


def test_a_missing_index_says_how_to_build_one_and_that_works(tmp_path, monkeypatch):
    from flows.api import Index, ingest

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    missing = tmp_path / "idx"
    with pytest.raises(IndexNotFoundError) as err:
        Index.open(missing)
    said = str(err.value)
    assert "Index.create" not in said and f"tessera ingest --source FILE --index {shlex.quote(str(missing))}" in said
    call = re.search(r"flows\.api\.(ingest\(FILE, '[^']+'\))", said).group(1)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"_id": "d1", "title": "Bee", "text": "Honey bees make honey."}) + "\n")
    eval(call, {"ingest": lambda file, path: ingest(file, path, settings={"dense": False}, progress=False),
                "FILE": corpus})  # the call as the message writes it
    assert len(Index.open(missing)) == 1


def test_timings_print_as_their_summary(bm25):
    timings = bm25.run(["honey bees", "opera"]).timings
    summary = timings.summary()
    assert list(summary) == ["step:bm25", "flow"] and summary["flow"]["count"] == 1
    shown = repr(timings)
    assert shown.startswith("Timings(step:bm25 ") and ", flow " in shown and "object at" not in shown
    assert str(timings) == shown


def test_the_calls_python_md_describes_name_their_parameters_as_the_code_does():
    """Each bullet's call (``* `index.search(queries, k=10, ...)` ...``) spells its arguments as the signature does:
    the page said ``index.search(query, ...)``, and ``index.search(query="bees")`` was a KeywordError."""
    import inspect

    from flows import api
    from flows.ingestion import ingest as run_ingestion

    calls = {"ingest": api.ingest, "Index.open": api.Index.open, "index.search": api.Index.search,
             "index.add": api.Index.add,
             "Flow.load": api.Flow.load, "flow.run": api.Flow.run, "flow.save": api.Flow.save}
    text = (REPO / "docs" / "python.md").read_text(encoding="utf-8")
    described = dict(re.findall(r"^\* `([\w.]+)\(([^)]*)\)`", text, flags=re.M))
    assert set(described) == set(calls)
    for call, arguments in described.items():
        names = [a.split("=")[0].strip() for a in arguments.split(",")]
        known = set(inspect.signature(calls[call]).parameters)
        if call == "ingest":  # its **options go to flows.ingestion.ingest
            known |= set(inspect.signature(run_ingestion).parameters)
        assert set(names) <= known, (call, names)


def evaluate_block() -> str:
    """The first Python block of docs/python.md's "Evaluate a result" section."""
    text = (REPO / "docs" / "python.md").read_text(encoding="utf-8")
    section = text.split("## Evaluate a result", 1)[1]
    return re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)


@pytest.mark.integration
def test_the_evaluate_a_result_example_runs_as_written(sample_index, tmp_path, monkeypatch):
    """The example, verbatim, over the ingested sample (chunked: docno is ``<doc_id>#<chunk>``), with the sample's
    queries and judgements naming documents: it scores the documents, where the same run keyed by docno scores 0."""
    import ir_measures

    from flows.api import Flow, Index

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    (tmp_path / "queries.jsonl").write_text((REPO / "data" / "sample" / "queries.jsonl").read_text())
    (tmp_path / "qrels.trec").write_text("q1 0 wv00790 1\nq2 0 wv00430 1\nq4 0 wv00240 1\n")  # Bee, Opera, Gothic
    scope = {"Flow": Flow, "index": Index.open(sample_index)}
    exec(compile(evaluate_block(), "docs/python.md", "exec"), scope)
    scores, table = scope["scores"], scope["result"].table
    assert scores[ir_measures.nDCG@10] > 0.5 and scores[ir_measures.R@100] == 1.0
    pairs = list(zip(table.column("qid").to_pylist(), table.column("doc_id").to_pylist()))
    assert len(pairs) == len(set(pairs))  # one row per document
    by_passage = [ir_measures.ScoredDoc(r["qid"], r["docno"], r["score"]) for r in table.to_pylist()]
    assert ir_measures.calc_aggregate([ir_measures.nDCG@10], scope["qrels"], by_passage)[ir_measures.nDCG@10] == 0
    (tmp_path / "qrels.trec").write_text("1 0 wv00790 1\n")  # judging qid 1, which the run does not have: not a 0
    with pytest.raises(AssertionError, match="the qrels judge no query of the run"):
        exec(compile(evaluate_block(), "docs/python.md", "exec"), dict(scope))
