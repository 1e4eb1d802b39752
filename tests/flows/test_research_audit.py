"""An IR researcher's audit: flows that keep the index they were given, a corpus that loses documents,
multi-hop index needs, an ingestion flow benchmarked, misspelt parameters, TREC run files.

The BEIR folders here are made in ``tmp_path`` (a few documents, BM25 only: no model); the TREC check on real
data reads a SciFact slice (``data``).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import ir_measures
import pyarrow as pa
import pytest
import yaml

from flows.spec import FlowSpec
from operators.errors import ParamsError

DOCS = [
    ("d1", "Honey bees", "Honey bees make honey from nectar and live in hives."),
    ("d2", "Gothic cathedrals", "Gothic cathedrals have pointed arches and flying buttresses."),
    ("d3", "Bumblebees", "Bumblebees are large hairy bees that pollinate tomatoes."),
    ("d4", "Romanesque churches", "Romanesque churches have round arches and thick walls."),
    ("d5", "Nectar", "Flowers make nectar, a sugary liquid that bees collect."),
]


def beir_folder(root: Path, *, broken: bool = False) -> Path:
    """Five documents (and, ``broken``, one line that is not JSON), two queries, their qrels."""
    (root / "qrels").mkdir(parents=True)
    lines = [json.dumps({"_id": i, "title": t, "text": x}) for i, t, x in DOCS]
    if broken:
        lines.insert(2, '{"_id": "d6", "title": "cut short", "text": ')
    (root / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "honey bees nectar"}) + "\n"
                                        + json.dumps({"_id": "q2", "text": "gothic arches"}) + "\n", encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td5\t1\nq2\td2\t1\n",
                                             encoding="utf-8")
    return root


@pytest.fixture
def home(monkeypatch, tmp_path) -> Path:
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "160")
    monkeypatch.delenv("TESSERA_DEBUG", raising=False)
    return tmp_path / "home"


@pytest.fixture
def tessera(home, capsys):
    """``tessera(*args)``: the command in this process; (exit status, stdout, stderr)."""
    from flows.commands import main

    def run(*args) -> tuple[int, str, str]:
        capsys.readouterr()
        status = main([str(a) for a in args])
        out = capsys.readouterr()
        return status, out.out, out.err

    return run


def bm25_index(corpus: Path, path: Path) -> Path:
    from flows.ingestion import ingest

    ingest(str(corpus), str(path), settings={"dense": False}, executor="local", progress=False)
    return path


# -- 1. a flow saved from Python does not keep the index it was loaded with -------------------------


def test_a_saved_flow_leaves_its_index_unset_and_run_index_fills_it(tessera, home, tmp_path):
    from flows.api import Flow, Index

    data = beir_folder(tmp_path / "data")
    index = Index.open(bm25_index(data / "corpus.jsonl", tmp_path / "idx"))
    flow = Flow.load("bm25", index=index)
    assert flow.spec.steps["bm25"].params["index"] == str(index.path)  # it runs on that index
    saved = yaml.safe_load(flow.save("mine").read_text())
    assert "index" not in saved["steps"]["bm25"].get("params", {})
    assert FlowSpec.load("mine").unset_index_steps()  # tessera run/bench fill it in
    status, out, err = tessera("run", "mine", "--index", index.path, "--queries", "honey bees", "--json", "--quiet")
    assert status == 0, err
    assert json.loads(out)["rows"][0]["docno"] == "d1"


def test_run_refuses_an_index_the_flow_would_ignore(tessera, tmp_path):
    own = tmp_path / "own.yaml"
    own.write_text("name: own\nsteps:\n  bm25: {op: retrieve.bm25, params: {index: /elsewhere/idx, k: 10}}\n")
    status, _, err = tessera("run", own, "--index", tmp_path / "other", "--queries", "bees", "--quiet")
    assert status == 2 and err.count("\n") == 1, err
    assert "names its own index" in err and "'bm25'" in err and "/elsewhere/idx" in err



def test_a_spec_that_does_not_build_says_why_before_the_unused_index(tessera, tmp_path):
    """--index on a flow that reads no index hid the spec's own error (k: 0) behind "drop --index"."""
    bad = tmp_path / "bad.yaml"
    bad.write_text("steps:\n  bm25: {op: retrieve.corpus_bm25, params: {k: 0}}\n")
    status, _, err = tessera("run", bad, "--index", tmp_path / "other", "--queries", "bees", "--quiet")
    assert status == 2 and "field 'steps.bm25.params.k': " in err, err
    assert "bad.yaml, line 2: must be greater than 0 (got 0)" in err, err
    bad.write_text("steps:\n  bm25: {op: retrieve.corpus_bm25, params: {k: 3}}\n")
    status, _, err = tessera("run", bad, "--index", tmp_path / "other", "--queries", "bees", "--quiet")
    assert status == 2 and "reads no index; drop --index" in err, err


def test_queries_for_a_flow_that_reads_none_are_refused_as_an_unused_index_is(tessera, tmp_path):
    """--queries on a flow whose steps start at a source ran it anyway: "1 query (1 with no results)", unread."""
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text('{"_id": "d1", "text": "Honey bees make honey."}\n')
    spec = tmp_path / "read.yaml"
    spec.write_text(f"name: read\nsteps:\n  read: {{op: sources.jsonl, params: {{path: '{corpus}'}}}}\n")
    status, _, err = tessera("run", spec, "--queries", "bees", "--quiet")
    assert status == 2 and err.count("\n") == 1, err
    assert "field '--queries': --queries would not be used: flow 'read' reads no queries" in err, err
    status, out, err = tessera("run", spec, "--json", "--quiet")
    assert status == 0 and [r["docno"] for r in json.loads(out)["rows"]] == ["d1"], err


# -- 2. documents that failed to ingest are a warning of the benchmark ---------------------------------


def test_bench_warns_of_corpus_documents_that_failed_to_ingest(tessera, tmp_path):
    data = beir_folder(tmp_path / "data", broken=True)
    spec = tmp_path / "bm25.yaml"
    spec.write_text("name: bm25\nsteps:\n  bm25: {op: retrieve.bm25, params: {k: 10}}\n")
    out = tmp_path / "out"
    status, _, err = tessera("bench", "--dataset", data, "--flow", f"bm25={spec}", "--k", "1,10", "--out", out,
                             "--index-dir", tmp_path / "indices", "--no-mlflow", "--quiet")
    assert status == 0, err
    info = json.loads((out / "bench.json").read_text())
    ledger = Path(info["flows"]["bm25"]["index"]["path"]) / "failures.jsonl"
    warning = next(w for w in info["warnings"] if "failed to ingest" in w)
    assert warning.startswith("1 corpus document(s)") and str(ledger) in warning and ledger.is_file()
    assert warning in (out / "report.md").read_text()
    assert f"tessera: warning: {warning}" in err
    # reused (not built) the next time: still said
    status, _, err = tessera("bench", "--dataset", data, "--flow", f"bm25={spec}", "--k", "1,10", "--out",
                             tmp_path / "again", "--index-dir", tmp_path / "indices", "--no-mlflow", "--quiet",
                             "--no-cache")
    assert status == 0 and "1 corpus document(s)" in err
    assert json.loads((tmp_path / "again" / "bench.json").read_text())["flows"]["bm25"]["index"]["built"] is False


def test_bench_of_a_clean_corpus_has_no_ingestion_warning(tessera, tmp_path):
    data = beir_folder(tmp_path / "data")
    spec = tmp_path / "bm25.yaml"
    spec.write_text("name: bm25\nsteps:\n  bm25: {op: retrieve.bm25, params: {k: 10}}\n")
    status, _, err = tessera("bench", "--dataset", data, "--flow", f"bm25={spec}", "--k", "1,10", "--out",
                             tmp_path / "out", "--index-dir", tmp_path / "indices", "--no-mlflow", "--quiet")
    assert status == 0, err
    assert not any("failed to ingest" in w for w in json.loads((tmp_path / "out" / "bench.json").read_text())
                   ["warnings"])


# -- 1 and 4. flows the benchmark cannot measure are refused before anything runs --------------------


@pytest.mark.parametrize("flow, expected", [("ingest", "is an ingestion flow (step 'read', sources.jsonl"),
                                            ("own", "step 'bm25' searches its own index '/elsewhere/idx'")])
def test_bench_refuses_flows_that_do_not_search_the_datasets_index(tessera, tmp_path, flow, expected):
    data = beir_folder(tmp_path / "data")
    own = tmp_path / "own.yaml"
    own.write_text("name: own\nsteps:\n  bm25: {op: retrieve.bm25, params: {index: /elsewhere/idx, k: 10}}\n")
    value = flow if flow == "ingest" else f"own={own}"
    status, _, err = tessera("bench", "--dataset", data, "--flow", value, "--out", tmp_path / "out",
                             "--index-dir", tmp_path / "indices", "--no-mlflow", "--quiet")
    assert status == 2 and err.count("\n") == 1, err
    assert f"bad --flow value '{value}'" in err and expected in err
    assert not (tmp_path / "indices").exists() and not (tmp_path / "out").exists()  # refused before anything


# -- 3. what an index built for a multi-hop flow holds follows its retriever ----------------------------


def test_multi_hop_index_features_follow_the_retriever():
    assert FlowSpec.load("bm25_multihop").index_features() == {"bm25"}
    assert FlowSpec.load("hybrid_multihop").index_features() == {"bm25", "dense"}
    assert FlowSpec.load("bm25").index_features() == {"bm25"}
    assert FlowSpec.load("hybrid").index_features() == {"bm25", "dense"}
    dense = FlowSpec.parse({"name": "d", "steps": {"h": {"op": "retrieve.multi_hop",
                                                         "params": {"retriever": "dense"}}}})
    assert dense.index_features() == {"dense"}


def test_bm25_multihop_plans_a_bm25_only_index(tmp_path):
    from flows.bench.indices import plan_index

    plan = plan_index(FlowSpec.load("bm25_multihop"), "0" * 64, tmp_path)
    assert plan.dense is False and plan.settings.bm25 is True
    assert plan_index(FlowSpec.load("hybrid_multihop"), "0" * 64, tmp_path).dense is True


# -- 5. a misspelt parameter gets the close ones and the list ------------------------------------------


def test_unknown_parameter_suggests_close_names_and_lists_them():
    with pytest.raises(ParamsError) as err:
        FlowSpec.parse({"name": "t", "steps": {"bm25": {"op": "retrieve.bm25", "params": {"top_k": 100}}}}).build()
    assert err.value.field == "steps.bm25.params.top_k"
    assert "unknown parameter; did you mean 'k'?" in err.value.message
    assert "(parameters: expand_factor, filter, filter_mode, index, k)" in err.value.message
    with pytest.raises(ParamsError, match="did you mean 'retriever'"):
        FlowSpec.parse({"name": "t", "steps": {"h": {"op": "retrieve.multi_hop",
                                                      "params": {"retreiver": "bm25"}}}}).build()
    with pytest.raises(ParamsError) as err:
        FlowSpec.parse({"name": "t", "steps": {"bm25": {"op": "retrieve.bm25", "params": {"zzz": 1}}}}).build()
    assert "did you mean" not in err.value.message and "parameters: " in err.value.message


def test_a_misspelt_required_parameter_is_named_as_sent_with_the_close_name():
    """``ulr`` for ``url``: pydantic reports the missing ``url`` first; the name the user sent is the one to fix."""
    with pytest.raises(ParamsError) as err:
        FlowSpec.parse({"name": "t", "steps": {"api": {"op": "rerank.api", "params": {"ulr": "http://x"}}}}).build()
    assert err.value.field == "steps.api.params.ulr"
    assert "unknown parameter; did you mean 'url'?" in err.value.message and "(+1 more error: url)" in err.value.message


# -- 6. TREC run files --------------------------------------------------------------------------------


def test_trec_scores_decrease_strictly_in_tesseras_order_when_scores_tie():
    from flows.bench.metrics import run_records
    from flows.trec_run import trec_run

    # Tessera ranks b, a, c at one score, then z above them: trec_eval orders by score, ties by docno
    # descending (z, c, b, a), so the file's scores must say b > a > c > z.
    table = pa.table({"qid": ["1", "1", "1", "1", "2"], "docno": ["a", "b", "c", "z", "x"],
                      "rank": [2, 1, 3, 4, 1], "score": [5.0, 5.0, 5.0, 7.0, None]})
    text = trec_run(table, "my flow")
    lines = [line.split() for line in text.splitlines()]
    assert [(q, q0, d, r, t) for q, q0, d, r, _, t in lines] == [
        ("1", "Q0", "b", "1", "my_flow"), ("1", "Q0", "a", "2", "my_flow"), ("1", "Q0", "c", "3", "my_flow"),
        ("1", "Q0", "z", "4", "my_flow"), ("2", "Q0", "x", "1", "my_flow")]
    scores = [float(parts[4]) for parts in lines if parts[0] == "1"]
    assert scores[0] == 5.0 and all(x > y for x, y in zip(scores, scores[1:]))
    assert float(lines[-1][4]) == -1.0  # a query without scores: -rank
    qrels = [ir_measures.Qrel("1", "a", 1), ir_measures.Qrel("2", "x", 1)]
    measures = [ir_measures.RR, ir_measures.nDCG @ 3]
    by_rank = pa.table({"qid": table["qid"], "docno": table["docno"], "rank": table["rank"]})
    assert (ir_measures.calc_aggregate(measures, qrels, list(ir_measures.read_trec_run(io.StringIO(text))))
            == ir_measures.calc_aggregate(measures, qrels, run_records(by_rank)))
    assert ir_measures.calc_aggregate([ir_measures.RR], qrels, run_records(by_rank))[ir_measures.RR] == 0.75


def test_a_trec_run_of_chunks_names_each_document_once_where_its_best_chunk_is():
    """Qrels judge documents: chunk ids (``d1#0``) would score 0, and a document twice would count twice."""
    from flows.trec_run import trec_run

    table = pa.table({"qid": ["1"] * 4 + ["2"], "docno": ["d1#1", "d2#0", "d1#0", "x", "d1#0"],
                      "doc_id": ["d1", "d2", "d1", None, "d1"], "rank": [1, 2, 3, 4, 1],
                      "score": [9.0, 8.0, 7.0, 6.0, 1.0]})
    lines = [line.split() for line in trec_run(table).splitlines()]
    assert [(q, d, r, float(s)) for q, _, d, r, s, _ in lines] == [
        ("1", "d1", "1", 9.0), ("1", "d2", "2", 8.0), ("1", "x", "3", 6.0), ("2", "d1", "1", 1.0)]


def test_run_writes_a_trec_run_and_refuses_what_cannot_be_one(tessera, tmp_path):
    from flows.queries import write_results
    from operators.errors import SpecError

    data = beir_folder(tmp_path / "data")
    index = bm25_index(data / "corpus.jsonl", tmp_path / "idx")
    status, _, err = tessera("run", "bm25", "--index", index, "--queries", data / "queries.jsonl",
                             "--out", tmp_path / "res.trec", "--quiet")
    assert status == 0, err
    lines = (tmp_path / "res.trec").read_text().splitlines()
    assert lines[0].split()[:4] == ["q1", "Q0", "d1", "1"] and lines[0].split()[5] == "bm25"
    status, _, err = tessera("ingest", "--source", data / "corpus.jsonl", "--index", tmp_path / "chunked",
                             "--no-dense", "--quiet")  # chunked: docno d1#0, doc_id d1
    assert status == 0, err
    status, _, err = tessera("run", "bm25", "--index", tmp_path / "chunked", "--queries", data / "queries.jsonl",
                             "--out", tmp_path / "chunked.trec", "--quiet")
    assert status == 0, err
    run = list(ir_measures.read_trec_run(str(tmp_path / "chunked.trec")))
    qrels = [ir_measures.Qrel("q1", "d1", 1), ir_measures.Qrel("q1", "d5", 1), ir_measures.Qrel("q2", "d2", 1)]
    assert {r.doc_id for r in run} <= {"d1", "d2", "d3", "d4", "d5"} and len(run) == len({(r.query_id, r.doc_id)
                                                                                           for r in run})
    assert ir_measures.calc_aggregate([ir_measures.R @ 5], qrels, run)[ir_measures.R @ 5] == 1.0
    with pytest.raises(SpecError, match="whitespace"):
        write_results(pa.table({"qid": ["1"], "docno": ["a b"], "rank": [1]}), tmp_path / "bad.run")
    with pytest.raises(SpecError, match="needs the columns qid, docno"):
        write_results(pa.table({"qid": ["1"], "answer": ["x"]}), tmp_path / "bad.trec")
    assert not (tmp_path / "bad.trec").exists()


@pytest.mark.data
@pytest.mark.slow
def test_bench_trec_runs_reproduce_its_measures_with_ir_measures(tessera, shared_data, tmp_path):
    """SciFact: 8 judged test queries, a corpus of their relevant documents and 400 others, BM25 only."""
    src = shared_data / "scifact"
    qrels_lines = (src / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    judged = {line.split("\t")[0] for line in qrels_lines[1:]}
    queries = [line for line in (src / "queries.jsonl").read_text(encoding="utf-8").splitlines()
               if json.loads(line)["_id"] in judged][:8]
    qids = {json.loads(line)["_id"] for line in queries}
    kept = [line for line in qrels_lines[1:] if line.split("\t")[0] in qids]
    relevant = {line.split("\t")[1] for line in kept}
    with open(src / "corpus.jsonl", encoding="utf-8") as f:
        corpus = [line.rstrip("\n") for i, line in enumerate(f) if i < 400 or json.loads(line)["_id"] in relevant]
    root = tmp_path / "scifact8"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("\n".join(corpus) + "\n", encoding="utf-8")
    (root / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text("\n".join([qrels_lines[0], *kept]) + "\n", encoding="utf-8")

    out = tmp_path / "out"
    status, _, err = tessera("bench", "--dataset", root, "--flow", "bm25", "--k", "1,10,100", "--out", out,
                             "--index-dir", tmp_path / "indices", "--no-mlflow", "--quiet")
    assert status == 0, err
    info = json.loads((out / "bench.json").read_text())["flows"]["bm25"]
    trec = Path(info["trec_file"])
    assert trec == Path(info["run_file"]).with_suffix(".trec") and trec.parent == out / "runs"
    reported = json.loads((out / "metrics.json").read_text())["bm25"]
    qrels = [ir_measures.Qrel(q, d, int(r)) for q, d, r in (line.split("\t") for line in kept)]
    measures = [ir_measures.nDCG @ 10, ir_measures.RR @ 10, ir_measures.AP @ 100, ir_measures.R @ 100]
    found = ir_measures.calc_aggregate(measures, qrels, list(ir_measures.read_trec_run(str(trec))))
    for measure, name in zip(measures, ("nDCG@10", "RR@10", "AP@100", "R@100")):
        assert found[measure] == pytest.approx(reported[name], abs=1e-12), name
    assert reported["nDCG@10"] > 0.3
    # tessera run over the same index writes the same run
    status, _, err = tessera("run", "bm25", "--index", info["index"]["path"], "--queries", root / "queries.jsonl",
                             "--out", tmp_path / "res.run", "--quiet")
    assert status == 0, err
    again = ir_measures.calc_aggregate(measures, qrels, list(ir_measures.read_trec_run(str(tmp_path / "res.run"))))
    assert again[measures[0]] == pytest.approx(reported["nDCG@10"], abs=1e-12)
