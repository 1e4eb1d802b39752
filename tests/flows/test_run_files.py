"""``flows.run_files.read_trec_run``: a run written by ``write_results`` reads back as it was, an external run
(Anserini's layout, tied scores, qids such as ``001``) reads in the order trec_eval and ir-measures evaluate it, and a
malformed line is refused naming the file and its line. On SciFact documents and queries, ingested and searched."""

import json

import ir_measures
import pyarrow.compute as pc
import pytest
from ir_measures import AP, RR, R, nDCG

from flows.api import Flow, ingest
from flows.queries import write_results
from flows.run_files import read_trec_run
from operators.errors import SpecError

pytestmark = pytest.mark.data


@pytest.fixture(scope="module")
def scifact_run(shared_data, tmp_path_factory):
    """A BM25 run of 10 judged SciFact queries over their relevant documents and 300 others, and its TREC qrels."""
    root = tmp_path_factory.mktemp("scifact_run")
    scifact = shared_data / "scifact"
    rows = [line.split("\t") for line in (scifact / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    qids = list(dict.fromkeys(q for q, _, _ in rows))[:10]
    judged = {d for q, d, _ in rows if q in qids}
    with open(scifact / "corpus.jsonl") as corpus, open(root / "corpus.jsonl", "w") as out:
        for number, line in enumerate(corpus):
            if number < 300 or json.loads(line)["_id"] in judged:
                out.write(line)
    (root / "qrels.trec").write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in rows if q in qids))
    texts = {r["_id"]: r["text"] for r in map(json.loads, (scifact / "queries.jsonl").read_text().splitlines())}
    index = ingest(root / "corpus.jsonl", root / "idx", settings={"dense": False}, chunk=False, progress=False)
    result = Flow.load("bm25", index=index).run({q: texts[q] for q in qids})
    write_results(result.table, root / "bm25.trec", tag="tessera_bm25")
    return root, result.table


def test_a_written_run_reads_back_as_it_was_and_scores_as_ir_measures_scores_the_file(scifact_run):
    root, table = scifact_run
    back = read_trec_run(root / "bm25.trec")
    assert back.column_names == ["qid", "docno", "rank", "score", "tag"]
    by_qid = [("qid", "ascending"), ("rank", "ascending")]  # the file lists qids sorted as text: '13' before '3'
    assert back.select(["qid", "docno", "rank"]).to_pylist() == table.select(["qid", "docno", "rank"]).sort_by(
        by_qid).to_pylist()
    assert set(back.column("tag").to_pylist()) == {"tessera_bm25"}
    qrels = list(ir_measures.read_trec_qrels(str(root / "qrels.trec")))
    measures = [nDCG @ 10, AP(rel=1) @ 100, R @ 100, RR]
    from_file = ir_measures.calc_aggregate(measures, qrels, ir_measures.read_trec_run(str(root / "bm25.trec")))
    read = [ir_measures.ScoredDoc(r["qid"], r["docno"], r["score"]) for r in back.to_pylist()]
    assert ir_measures.calc_aggregate(measures, qrels, read) == from_file
    assert from_file[nDCG @ 10] > 0.5  # the run found SciFact's relevant abstracts


def test_an_external_run_is_in_trec_evals_order_with_its_ids_as_written(scifact_run, tmp_path):
    root, table = scifact_run
    qid = table["qid"][0].as_py()
    docnos = table.filter(pc.equal(table["qid"], qid))["docno"].to_pylist()[:4]
    run = tmp_path / "anserini.trec"  # Anserini's layout; tied scores; its rank column is not what trec_eval reads
    run.write_text(f"001 Q0 {docnos[0]} 1 9.5 Anserini\n"
                   f"{qid} Q0 {docnos[1]} 1 7.25 Anserini\n\n"
                   f"{qid} Q0 {docnos[2]} 2 7.25 Anserini\n"
                   f"{qid} Q0 {docnos[3]} 3 8 Anserini\n")
    back = read_trec_run(run)
    tied = sorted(docnos[1:3], reverse=True)  # trec_eval: score descending, then docno descending
    assert back.select(["qid", "docno", "rank", "score"]).to_pylist() == [
        {"qid": "001", "docno": docnos[0], "rank": 1, "score": 9.5},
        {"qid": qid, "docno": docnos[3], "rank": 1, "score": 8.0},
        {"qid": qid, "docno": tied[0], "rank": 2, "score": 7.25},
        {"qid": qid, "docno": tied[1], "rank": 3, "score": 7.25}]
    order = [(d.query_id, d.doc_id) for d in ir_measures.read_trec_run(str(run))]
    assert sorted(order) == sorted(zip(back["qid"].to_pylist(), back["docno"].to_pylist()))


@pytest.mark.parametrize("line, says", [
    ("1 Q0 31715818 2 4.1\n", "this one has 5"),
    ("1 Q0 31715818 2 abc bm25\n", "the score (column 5) is 'abc', not a number"),
    ("1 Q0 31715818 two 4.1 bm25\n", "the rank (column 4) is 'two', not a whole number"),
    ("1 Q0 4983 2 4.1 bm25\n", "query '1' lists document '4983' again (first at line 1)"),
])
def test_a_malformed_line_is_refused_naming_the_file_and_the_line(tmp_path, line, says):
    run = tmp_path / "run.trec"
    run.write_text("1 Q0 4983 1 5.0 bm25\n" + line)
    with pytest.raises(SpecError) as err:
        read_trec_run(run)
    assert f"{run}:2: " in str(err.value) and says in str(err.value)


def test_a_run_that_is_not_utf8_is_refused_naming_its_line(tmp_path):
    run = tmp_path / "run.trec"
    run.write_bytes("1 Q0 4983 1 5.0 bm25\n1 Q0 caf\u00e9 2 4.0 bm25\n".encode("cp1252"))
    with pytest.raises(SpecError, match=rf"{run}:2: the run file is not UTF-8"):
        read_trec_run(run)
