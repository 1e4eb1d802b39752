"""A benchmark on the user's own files, written the ways users write them.

Qrels and answers as other tools and editors leave them (a byte order mark, Windows line ends,
TREC or BEIR columns, padded cells, a judgement written twice) read as the clean file does; ids
that match nothing between the files are named, and refused where every query would score 0,
instead of a mean that is silently lower. The datasets are a few lines written by each test.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from flows.bench.errors import BenchError

CORPUS = {"d1": "Daily low-dose aspirin reduces the risk of a first heart attack.",
          "d3": "Caffeine in coffee delays sleep onset.", "d7": "Deep sleep consolidates memory.",
          "d10": "Paris is the capital of France."}
QUERIES = {"q1": "does aspirin prevent heart attacks", "q2": "coffee and sleep", "q5": "capital of France"}
JUDGED = [("q1", "d1", 1), ("q2", "d3", 2), ("q2", "d7", 1), ("q5", "d10", 1)]
BEIR = "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{r}\n" for q, d, r in JUDGED)
TREC = "".join(f"{q} 0 {d} {r}\n" for q, d, r in JUDGED)
#: A header naming more columns than BEIR's three: read by their names (the extra column was taken for the grade)
NOTED = "query-id\tcorpus-id\tscore\tnote\n" + "".join(f"{q}\t{d}\t{r}\tby hand\n" for q, d, r in JUDGED)
NAMED = "topic iteration docno rel judge\n" + "".join(f"{q} 0 {d} {r} ann\n" for q, d, r in JUDGED)


def write_dataset(root: Path, qrels: str, *, queries: dict | None = None, questions: str | None = None) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "text": t}) + "\n" for k, t in CORPUS.items()),
                                       encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps({"_id": k, "text": t}) + "\n"
                                                for k, t in (queries or QUERIES).items()), encoding="utf-8")
    (root / "qrels" / "test.tsv").write_bytes(qrels.encode("utf-8"))
    if questions is not None:
        (root / "questions.jsonl").write_bytes(questions.encode("utf-8"))
    return root


@pytest.mark.parametrize("qrels", [
    BEIR, BEIR.split("\n", 1)[1], TREC, TREC.replace(" ", "\t"), BEIR + "\n\n", BEIR.replace("\n", "\r\n"),
    "\ufeff" + BEIR, "\ufeff" + BEIR.split("\n", 1)[1], "\ufeff" + TREC, BEIR.replace("\n", "\t\n"),
    BEIR.replace("\td10\t", "\t d10 \t"), BEIR + "q2\td3\t2\n", NOTED, NAMED,
], ids=["beir", "no-header", "trec", "trec-tabs", "blank-lines", "crlf", "bom", "bom-no-header", "bom-trec",
        "trailing-tab", "padded-cells", "repeated", "extra-column", "named-columns"])
def test_qrels_as_users_write_them_read_as_the_clean_file(tmp_path, qrels):
    from operators.sources._beir_files import load_qrels

    table = load_qrels(write_dataset(tmp_path / "d", qrels), "test")
    assert list(zip(*(table.column(c).to_pylist() for c in ("qid", "docno", "relevance")))) == JUDGED


def test_a_judgement_given_two_grades_is_an_error_naming_both_lines(tmp_path):
    root = write_dataset(tmp_path / "d", BEIR + "q1\td1\t0\n")
    with pytest.raises(BenchError) as err:
        _load(root)
    assert err.value.field == "dataset" and f"{root / 'qrels' / 'test.tsv'}, line 6" in err.value.message
    assert "'q1' and document 'd1' are judged 0 here and 1 on line 2" in err.value.message


def test_a_grade_that_is_not_whole_is_an_error_naming_file_line_and_grade(tmp_path):
    """ir-measures takes integer grades: 1.5 was read as 1 without a word. 1.0 is whole, and reads as 1."""
    root = write_dataset(tmp_path / "d", BEIR.replace("q2\td7\t1", "q2\td7\t1.5"))
    with pytest.raises(BenchError) as err:
        _load(root)
    assert err.value.field == "dataset"
    assert err.value.message == (f"{root / 'qrels' / 'test.tsv'}, line 4: relevance '1.5' is not a whole number "
                                 "(grades are 0, 1, 2, ...)")
    assert _load(write_dataset(tmp_path / "whole", BEIR.replace("q2\td7\t1", "q2\td7\t1.0"))).qrels.column(
        "relevance").to_pylist() == [r for _, _, r in JUDGED]


@pytest.mark.parametrize("splits, said", [
    (["dev"], "(the only split there is 'dev': give --split dev)"),
    (["dev", "train"], "(splits there: dev, train: give --split with one of them)"),
    ([], "(no qrels/SPLIT.tsv file there: BEIR layout)"),
])
def test_a_split_the_dataset_lacks_names_the_option_that_picks_one_it_has(tmp_path, splits, said):
    """A folder of qrels/dev.tsv alone (no test.tsv, the default) said '(splits there: dev)', not how to pick it."""
    root = write_dataset(tmp_path / "d", BEIR)
    (root / "qrels" / "test.tsv").unlink()
    for split in splits:
        (root / "qrels" / f"{split}.tsv").write_text(BEIR, encoding="utf-8")
    with pytest.raises(BenchError) as err:
        _load(root)
    assert err.value.field == "split"
    assert err.value.message == f"no qrels file '{root / 'qrels' / 'test.tsv'}' {said}"


def _load(root: Path):
    from flows.bench.dataset import load_dataset

    return load_dataset(root, split="test")


def test_ids_that_match_nothing_are_named_and_refused_where_every_query_would_score_0(tmp_path):
    for qrels in ("", "query-id\tcorpus-id\tscore\n\n"):
        empty = write_dataset(tmp_path / f"empty{len(qrels)}", qrels)
        with pytest.raises(BenchError, match=re.escape(f"{empty / 'qrels' / 'test.tsv'} holds no judgement")):
            _load(empty)
    padded = write_dataset(tmp_path / "padded", BEIR.replace("\nq", "\n00"),
                           queries={k[1:]: t for k, t in QUERIES.items()})
    with pytest.raises(BenchError, match=r"no query of .*queries.jsonl has judgements in .*test.tsv \(its ids: "
                                         r"'1', '2', '5'; the judged ones: '001', '002', '005'\)"):
        _load(padded)
    prefixed = write_dataset(tmp_path / "prefixed", BEIR.replace("\td", "\tdoc"))
    with pytest.raises(BenchError, match=r"no relevant judgement of .*test.tsv names a document of .*corpus.jsonl "
                                         r"\(its ids: 'd1', 'd3', 'd7'; the judged ones: 'doc1', 'doc3', 'doc7'\): "
                                         "every query would score 0"):
        _load(prefixed)
    unjudged = write_dataset(tmp_path / "zeros", "query-id\tcorpus-id\tscore\nq1\td1\t0\nq5\td3\t0\n")
    with pytest.raises(BenchError, match=r"no judgement of .*test.tsv for the queries benchmarked is relevant"):
        _load(unjudged)  # every measure 0, nDCG too, with a warning that spoke of the binary ones alone before
    some = _load(write_dataset(tmp_path / "some", BEIR + "q1\tdX\t1\nq9\td1\t1\nq5\td2\t0\n"))
    first, second = some.warnings()
    assert "1 judged queries of" in first and "(such as 'q9')" in first
    assert "1 of the 5 relevant judgements" in second and "(such as 'dX')" in second  # d2, judged 0, is no matter
    assert _load(write_dataset(tmp_path / "clean", BEIR)).warnings() == []


def test_gold_answers_as_users_write_them(tmp_path):
    lines = [{"_id": "q1", "answer": ["Paris", "City of Paris"]}, {"_id": "q2", "answer": None},
             {"_id": "q5", "answer": " ", "answer_aliases": [""]}]
    text = "\ufeff" + "".join(json.dumps(line) + "\r\n" for line in lines)
    gold = _load(write_dataset(tmp_path / "d", BEIR, questions=text)).answers
    # q2 and q5 have no gold answer, so the answer measures leave them out (answers.per_query) instead of scoring 0
    assert gold == {"q1": ["Paris", "City of Paris"]}
    # ids under the names queries.jsonl's may have (qid, query_id, id) were refused as "('_id')", a KeyError's words
    text = "".join(json.dumps(line) + "\n" for line in ({"qid": "q1", "answer": "Paris"}, {"id": "q2", "answer": 7}))
    assert _load(write_dataset(tmp_path / "qid", BEIR, questions=text)).answers == {"q1": ["Paris"], "q2": ["7"]}
    refused = [(lines[0], "line 2: question 'q1' is there already (line 1)"),
               ({"_id": "q2", "answer": {"text": ["Paris"]}}, "line 2: not a question with '_id' and 'answer' (an "
                                                                "answer is a string or a list"),
               ({"_id": "q2", "answers": ["x"]}, "line 2: not a question with '_id' and 'answer' (no 'answer'; its "
                                                 "fields: '_id', 'answers')"),
               (["q2", "Paris"], "line 2: not a question with '_id' and 'answer' (a JSON object a line, not "
                                 '["q2", "Paris"])'),  # "string indices must be integers" before
               ({"_id": "q2", "answer": True}, "(an answer is a string or a list of strings, not true)")]  # 'True'
    for n, (bad, needle) in enumerate(refused):
        text = "".join(json.dumps(line) + "\n" for line in (lines[0], bad))
        with pytest.raises(BenchError, match=re.escape(needle)):
            _load(write_dataset(tmp_path / f"bad{n}", BEIR, questions=text))


def test_ids_with_whitespace_are_refused_before_anything_runs_naming_the_file(tmp_path):
    """A TREC run cannot hold them: the benchmark failed writing one, after every flow (and the index) had run."""
    spaced_query = write_dataset(tmp_path / "q", BEIR.replace("q5\t", "q 5\t"),
                                 queries={**QUERIES, "q 5": QUERIES["q5"]})
    with pytest.raises(BenchError, match=re.escape(f"{spaced_query / 'queries.jsonl'}: query id 'q 5' has whitespace")):
        _load(spaced_query)
    spaced_doc = write_dataset(tmp_path / "d", BEIR)
    corpus = spaced_doc / "corpus.jsonl"
    corpus.write_text(corpus.read_text(encoding="utf-8").replace('"d7"', '"d 7"'), encoding="utf-8")
    with pytest.raises(BenchError, match=re.escape(f"{corpus} line 3: document id 'd 7' has whitespace")):
        _load(spaced_doc)
    from flows.bench.dataset import load_dataset

    assert load_dataset(spaced_doc, benchmarked=False).unknown_docs == ("d7",)  # training reads it as it is


def test_a_corpus_whose_every_document_fails_to_index_is_refused_not_scored_zero(tmp_path, bench):
    """Every document empty: the index held none, and the benchmark printed a table of zeros as a result."""
    root = write_dataset(tmp_path / "d", BEIR)
    (root / "corpus.jsonl").write_text("".join(json.dumps({"_id": k, "text": ""}) + "\n" for k in CORPUS))
    status, _, err = bench("--dataset", root, "--flow", "bm25", "--out", tmp_path / "out", "--no-mlflow")
    assert status == 2 and "flow 'bm25': no document of the corpus could be indexed (4 failed" in err, err
    assert "so every query would score 0" in err and "failures.jsonl" in err


@pytest.mark.parametrize("args, field, said", [
    (["--flow", "bm52"], "--flow", "bm52"),  # it said field 'flow', where every other option's has its dashes
    (["--flow", "bm25", "--baseline", "nope"], "--baseline", "--baseline 'nope' is not one of the flows"),
    (["--flow", "..=bm25"], "--flow", "the name '..' starts with a letter or digit, then holds letters, digits"),
])
def test_a_bad_flow_or_baseline_is_named_as_the_option_it_came_from(tmp_path, bench, args, field, said):
    root = write_dataset(tmp_path / "d", BEIR)
    status, _, err = bench("--dataset", root, *args, "--out", tmp_path / "out", "--no-mlflow")
    assert status == 2 and f"field '{field}'" in err and said in err, err


@pytest.mark.parametrize("settings, key, said", [
    ("{stemmer: English}", "stemmer': ", "'English' is no PyStemmer language; did you mean 'english'"),
    ("{stopwords: xx}", "stopwords': ", "'xx' is no language bm25s has stopwords for"),
    ("{encodr: all-MiniLM-L6-v2}", "encodr': ", "unknown index setting 'encodr'; did you mean 'encoder'?"),
])
def test_a_later_flows_bad_index_settings_are_refused_before_any_flow_runs(tmp_path, bench, settings, key, said):
    """A stemmer PyStemmer lacks failed as an internal error once the first shard of the index was written (its
    documents embedded first); and a flow's settings were checked only when its turn came, after the flows before
    it had run and built their indices. The spec's loading checks them now."""
    root = write_dataset(tmp_path / "d", BEIR)
    spec = tmp_path / "stemmed.yaml"
    spec.write_text(f"name: stemmed\nindex_settings: {settings}\nsteps:\n  bm25: {{op: retrieve.bm25, params: "
                    "{k: 10}}\n")
    status, _, err = bench("--dataset", root, "--flow", "bm25", "--flow", spec, "--out", tmp_path / "out",
                           "--no-mlflow")
    assert status == 2 and f"stemmed.yaml': field 'index_settings.{key}{spec}, line 2: {said}" in err, err
    assert "ran in" not in err and not (tmp_path / "out").exists()


def test_a_repeated_corpus_id_is_said_in_the_benchmarks_words(tmp_path, bench, caplog):
    """The ingestion's warning advised 'retry_failed=True' (Python's, and no fix for a benchmark, whose index is
    built anew from a changed corpus), and the benchmark added that a relevant document among the left-out ones
    'counts as not found', where the id's first copy is in the index and every score is the clean corpus's."""
    root = write_dataset(tmp_path / "d", BEIR)
    with open(root / "corpus.jsonl", "a", encoding="utf-8") as corpus:
        corpus.write(json.dumps({"_id": "d1", "text": "A second page under the first one's id."}) + "\n")
    with caplog.at_level("WARNING", logger="tessera.ingest"):
        status, out, err = bench("--dataset", root, "--flow", "bm25", "--out", tmp_path / "out", "--no-mlflow",
                                 "--json")
    assert status == 0, err
    said = caplog.text
    assert "repeats 1 id(s) of documents before them (d1 at line" in said
    assert "fix them in the corpus: the next benchmark builds its index again" in said
    assert "retry_failed" not in said and "counts as not found" not in err
    repeats = f"{root / 'corpus.jsonl'} repeats 1 document id(s) (such as 'd1'): the index holds the first copy"
    assert repeats in err and repeats in " ".join(json.loads((tmp_path / "out" / "bench.json").read_text())["warnings"])
    clean = write_dataset(tmp_path / "clean", BEIR)
    status, clean_out, _ = bench("--dataset", clean, "--flow", "bm25", "--out", tmp_path / "out2", "--no-mlflow",
                                 "--json")
    assert json.loads(out)["flows"]["bm25"]["measures"] == json.loads(clean_out)["flows"]["bm25"]["measures"]


def test_an_empty_corpus_is_said_to_be_empty(tmp_path, bench):
    root = write_dataset(tmp_path / "d", BEIR)
    (root / "corpus.jsonl").write_text("\n")
    status, _, err = bench("--dataset", root, "--flow", "bm25", "--out", tmp_path / "out", "--no-mlflow")
    assert status == 2 and "corpus.jsonl holds no document (a JSON object a line, with its _id)" in err, err
    assert "its ids: ;" not in err  # what it said before


@pytest.mark.parametrize("no_cache, how", [
    ((), "run the same command again"),
    (("--no-cache",), "run it again without --no-cache (which runs every flow anew)"),
])
def test_a_ctrl_c_after_a_flow_says_the_command_that_resumes_from_its_saved_run(tmp_path, bench, monkeypatch, no_cache,
                                                                               how):
    """It said ``tessera: interrupted`` alone, where the docs promise that the same command resumes; and with
    ``--no-cache`` the same command runs every flow again, the finished one too."""
    import shlex
    import signal

    from flows.bench.console import BenchReporter

    args = [str(a) for a in ("--dataset", write_dataset(tmp_path / "d", BEIR), "--flow", "bm25", "--flow",
                             "again=bm25", "--out", tmp_path / "out", "--no-mlflow", "--k", "1,10")]
    finished, handler = BenchReporter.flow_finished, signal.getsignal(signal.SIGINT)

    def then_ctrl_c(self, name: str, message: str) -> None:
        finished(self, name, message)
        raise KeyboardInterrupt  # as Python's SIGINT handler does: Ctrl-C once the first flow's run is saved

    try:
        with monkeypatch.context() as patched:
            patched.setattr(BenchReporter, "flow_finished", then_ctrl_c)
            status, _, err = bench(*args, *no_cache)
    finally:
        signal.signal(signal.SIGINT, handler)  # the command's own handler stays after an interrupt, as in a process
    resume = shlex.join(["tessera", "bench", *args])
    assert status == 130 and err.endswith(f"tessera: interrupted; what was committed stays: to resume, {how}: "
                                          f"{resume}\n"), err
    status, _, err = bench(*args)
    assert status == 0 and "bm25: cached run" in err and "again: ran in" in err, err


def test_the_tables_measures_are_found_in_the_files_by_the_name_under_them(tmp_path, bench):
    """The table said MRR@10, MAP@10 and Recall@10, bench.json and the CSVs RR@10, AP@10 and R@10 (ir-measures'):
    a user looking for the table's number in the files found no such name. The files' name is under the table's."""
    root = write_dataset(tmp_path / "d", BEIR)
    status, out, err = bench("--dataset", root, "--flow", "bm25", "--out", tmp_path / "out", "--no-mlflow")
    assert status == 0, err
    header = [line for line in out.splitlines() if "MRR@10" in line or "RR@10" in line]
    assert len(header) == 2 and "MRR@10" in header[0] and "(RR@10)" in header[1] and "(AP@10)" in header[1], out
    row = next(line for line in out.splitlines() if line.startswith("│ bm25"))
    columns = [cell.strip() for cell in header[1].split("┃")]
    means = json.loads((tmp_path / "out" / "metrics.json").read_text())["bm25"]
    for name in ("RR@10", "AP@10", "R@10"):
        assert row.split("│")[columns.index(f"({name})")].strip() == f"{means[name]:.4f}"
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| MRR@10 (RR@10) |" in report and "| Recall@10 (R@10) |" in report


class _Paris:
    """``test.paris``: answers every query 'Paris', a flow that answers without a language model."""

    @staticmethod
    def operator():
        import pyarrow as pa
        from pydantic import BaseModel, ConfigDict

        from operators.base import Operator

        class Paris(Operator):
            name = "test.paris"
            scope = "query"

            class Params(BaseModel):
                model_config = ConfigDict(extra="forbid")

            def transform(self, table: pa.Table) -> pa.Table:
                for qid in set(table.column("qid").to_pylist()):
                    self.emit_metadata(qid, "answer", "Paris")
                return table

        return Paris


def test_queries_left_out_of_the_answer_measures_and_of_the_run_are_said(tmp_path, bench, monkeypatch):
    """A questions.jsonl of other ids said 'has no questions.jsonl', and one answering some of the queries gave means
    over those without a word (the 'n' of metrics.csv alone said it); queries.jsonl's queries without a judgement
    were left out of the run unsaid ('3 judged queries')."""
    from operators import registry

    registry.all_operators()
    monkeypatch.setitem(registry._registry, "test.paris", _Paris.operator())
    root = write_dataset(tmp_path / "d", BEIR, queries={**QUERIES, "q8": "an unjudged query"},
                         questions=json.dumps({"_id": "005", "answer": "Paris"}) + "\n")
    spec = tmp_path / "paris.yaml"
    spec.write_text("name: paris\nsteps:\n  bm25: {op: retrieve.bm25, params: {k: 10}}\n  answer: {op: test.paris}\n")
    status, _, err = bench("--dataset", root, "--flow", spec, "--out", tmp_path / "out", "--no-mlflow", "--k", "10")
    assert status == 0, err
    said = (f"tessera: warning: flow 'paris' answers, but {root / 'questions.jsonl'} has no gold answer for any of "
            "the 3 queries benchmarked (such as 'q1', 'q2', 'q5'): no answer measures; check that the files use the "
            "same ids")
    assert said in " ".join(err.split()), err
    assert "3 judged queries (1 of queries.jsonl without a judgement in test.tsv are not run)" in err, err
    assert "AnswerEM" not in json.loads((tmp_path / "out" / "metrics.json").read_text())["paris"]
    from flows.bench.core import _gold_warnings

    some = write_dataset(tmp_path / "some", BEIR, questions=json.dumps({"_id": "q5", "answer": "Paris"}) + "\n")
    assert _gold_warnings("paris", _load(some)) == [
        f"2 of the 3 queries benchmarked have no gold answer in {some / 'questions.jsonl'} (such as 'q1', 'q2'; a "
        "null or blank answer is none): the answer measures (AnswerEM, AnswerF1) are over the other 1"]


def test_queries_judged_0_alone_are_said_to_score_0_on_every_measure(tmp_path, bench):
    """A query whose judgements are all 0 or below scores 0 on nDCG too: the warning said 'the binary measures (all
    but nDCG) score them 0', and at --min-relevance 2 counted it among the queries short of grade 2."""
    root = write_dataset(tmp_path / "d", BEIR + "q6\td7\t0\nq6\td1\t-1\n", queries={**QUERIES, "q6": "deep sleep"})
    status, _, err = bench("--dataset", root, "--flow", "bm25", "--out", tmp_path / "out", "--no-mlflow", "--k", "10",
                           "--min-relevance", "2")
    assert status == 0, err
    err = " ".join(err.split())
    assert ("tessera: warning: 1 of 4 queries have no document judged above 0 (such as 'q6'): every measure scores "
            "them 0, nDCG too, whatever a flow finds") in err
    assert "tessera: warning: 2 of 4 queries have no document judged 2 or above: the binary measures" in err
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "out" / "per_query.parquet").to_pylist()
    assert {r["value"] for r in rows if r["qid"] == "q6"} == {0.0}  # nDCG@10 included


def test_a_cutoff_above_the_corpus_size_is_said_and_scored_as_ir_measures_does(tmp_path, bench):
    """--k 1000 over 4 documents gave P@1000 = 0.0008 headlining the table, with a warning that the flow's k was
    below 1000 'or it matched fewer documents'; no flow can return more than the corpus holds."""
    import ir_measures

    root = write_dataset(tmp_path / "d", TREC)
    status, _, err = bench("--dataset", root, "--flow", "bm25", "--out", tmp_path / "out", "--no-mlflow", "--k",
                           "1,1000,1000,3")
    assert status == 0, err
    assert (f"tessera: warning: cutoff 1000 is above the 4 documents of {root / 'corpus.jsonl'}: no flow returns "
            "that many, and P@k (F1@k with it) divides by k, so P@1000 is at most 0.004") in " ".join(err.split())
    means = json.loads((tmp_path / "out" / "metrics.json").read_text())["bm25"]
    [trec] = (tmp_path / "out" / "runs").glob("*.trec")
    qrels = [ir_measures.Qrel(q, d, r) for q, d, r in JUDGED]
    expected = ir_measures.calc_aggregate([ir_measures.P @ 1000, ir_measures.nDCG @ 3, ir_measures.R @ 1], qrels,
                                          list(ir_measures.read_trec_run(str(trec))))
    assert {str(m): v for m, v in expected.items()} == pytest.approx({m: means[m] for m in ("P@1000", "nDCG@3",
                                                                                          "R@1")})
