"""A dataset folder as a new user first gives it: a typo in its path, a corpus or qrels file under another name.
Each is refused naming what is there and what to do, not only what is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.bench.dataset import load_dataset
from flows.bench.errors import BenchError

CORPUS = [{"_id": "d1", "title": "Aspirin", "text": "Daily low-dose aspirin reduces heart attacks."},
          {"_id": "d2", "title": "", "text": "Caffeine delays sleep onset."}]
QUERIES = [{"_id": "q1", "text": "does aspirin prevent heart attacks"}, {"_id": "q2", "text": "coffee and sleep"}]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n"


def write(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in CORPUS), encoding="utf-8")
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUERIES), encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text(QRELS, encoding="utf-8")
    return root


def refused(folder, field: str = "dataset") -> str:
    with pytest.raises(BenchError) as err:
        load_dataset(folder)
    assert err.value.field == field
    return err.value.message


@pytest.mark.parametrize("given, meant", [
    ("data/scifcat", "data/scifact"), ("dat/scifact", "data/scifact"), ("data/Scifact/", "data/scifact"),
])
def test_a_misspelt_dataset_folder_names_the_folder_meant_as_the_path_was_given(tmp_path, monkeypatch, given, meant):
    write(tmp_path / "data" / "scifact")
    monkeypatch.chdir(tmp_path)
    assert refused(given) == (f"dataset folder '{given}' does not exist (a relative path, read from {tmp_path}); "
                              f"did you mean '{meant}'?")
    assert refused(tmp_path / given).endswith(f"; did you mean '{tmp_path / meant}'?")
    assert "did you mean" not in refused("data/nothing_like_it")  # no folder close to it: no guess


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_corpus_as_a_table_is_named_with_a_command_that_writes_the_jsonl_the_benchmark_reads(tmp_path, suffix):
    """'has no corpus.jsonl' left a user with corpus.csv (or BEIR's Parquet) guessing the format; the command given
    writes it, for a folder of any name (a quote in it broke the command's quoting)."""
    import csv
    import shlex

    import pyarrow as pa
    import pyarrow.parquet as pq

    root = write(tmp_path / "Bob's $HOME data")
    (root / "corpus.jsonl").unlink()
    if suffix == ".csv":
        with open(root / "corpus.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=["_id", "title", "text"])
            writer.writeheader()
            writer.writerows(CORPUS)
    else:
        pq.write_table(pa.Table.from_pylist(CORPUS), root / "corpus.parquet")
    message = refused(root)
    assert message.startswith(f"dataset folder '{root}' has no corpus.jsonl (BEIR layout: corpus.jsonl, "
                              f"queries.jsonl, qrels/<split>.tsv); it has corpus{suffix}, which is not read: write "
                              f"corpus.jsonl beside it, one JSON object a line with _id, title, text (from "
                              f"corpus{suffix}, its columns named so: python -c ")
    argv = shlex.split(message.split("its columns named so: ", 1)[1].removesuffix(")"))  # as a shell splits it
    assert argv[:2] == ["python", "-c"] and len(argv) == 3
    exec(argv[2], {})
    assert [json.loads(line) for line in (root / "corpus.jsonl").read_text(encoding="utf-8").splitlines()] == CORPUS
    assert load_dataset(root).documents == 2


def test_a_missing_queries_file_names_what_the_folder_holds(tmp_path):
    root = write(tmp_path / "d")
    (root / "queries.jsonl").rename(root / "topics.jsonl")
    assert refused(root).endswith("; the folder holds corpus.jsonl, qrels, topics.jsonl")


@pytest.mark.parametrize("where", ["qrels/test.csv", "qrels.tsv", "test.tsv"])
def test_a_qrels_file_elsewhere_is_named_with_where_to_move_it(tmp_path, where):
    root = write(tmp_path / "d")
    (root / "qrels" / "test.tsv").rename(root / where)
    message = refused(root, "split")
    assert message.endswith(f"; {root / where} is not read: qrels are read from qrels/<split>.tsv, so move it to "
                            f"{root / 'qrels' / 'test.tsv'} (columns separated by tabs or spaces)")


@pytest.mark.parametrize("qrels, said", [
    (QRELS.replace("\t", ","), "; its columns are separated by commas, which a qrels file's are not: write tabs "
                               "between them"),
    ("q1\td1\nq2\td2\n", "; each judgement needs its grade, a third column (1: relevant, as in 'q1<TAB>d1<TAB>1')"),
])
def test_qrels_of_too_few_columns_say_what_they_most_likely_are(tmp_path, qrels, said):
    """A CSV's qrels, or pairs without grades, said only 'got 1' or 'got 2' columns."""
    root = write(tmp_path / "d")
    (root / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    assert refused(root).endswith(said)


def test_a_query_without_a_text_field_says_which_field_it_lacks_and_the_fields_it_has(tmp_path):
    """{"id": ..., "question": ...} was told 'a query needs an id (_id or qid) and a text', though 'id' is an id."""
    root = write(tmp_path / "d")
    (root / "queries.jsonl").write_text("".join(json.dumps({"id": q["_id"], "question": q["text"]}) + "\n"
                                                for q in QUERIES), encoding="utf-8")
    assert refused(root) == (f"{root / 'queries.jsonl'}:1: a query needs a text (query or text); its fields: 'id', "
                             "'question'")


def test_queries_without_a_judgement_are_counted_in_bench_json_and_the_report_not_only_on_the_console(tmp_path,
                                                                                                      bench):
    """With --quiet the console's dataset line is not shown, and bench.json and report.md said '2 judged queries'
    alone: a third of the user's queries left out of every mean without a word in any file."""
    root = write(tmp_path / "d")
    with open(root / "queries.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"_id": "q9", "text": "a query nobody judged"}) + "\n")
    status, _, err = bench("--dataset", root, "--flow", "bm25", "--out", tmp_path / "out", "--no-mlflow", "--quiet",
                           "--k", "1")
    assert status == 0, err
    assert json.loads((tmp_path / "out" / "bench.json").read_text())["dataset"]["unjudged"] == 1
    said = "2 judged queries (1 of queries.jsonl without a judgement in test.tsv are not run), 2 judgements;"
    assert said in (tmp_path / "out" / "report.md").read_text()


def test_gold_answers_written_into_queries_jsonl_are_said_to_go_into_questions_jsonl(tmp_path):
    """A QA set's answers beside its queries' texts gave 'has no questions.jsonl with gold answers' alone."""
    from flows.bench.core import _gold_warnings

    root = write(tmp_path / "d")
    (root / "queries.jsonl").write_text("".join(json.dumps({**q, "answers": ["yes"]}) + "\n" for q in QUERIES),
                                        encoding="utf-8")
    assert _gold_warnings("rag", load_dataset(root)) == [
        f"flow 'rag' answers, but {root} has no questions.jsonl with gold answers: no answer measures "
        f"({root / 'queries.jsonl'} holds 'answers', which the benchmark does not read: write questions.jsonl beside "
        "it, one {\"_id\": ..., \"answer\": ...} a line, where an answer may be a list of correct answers)"]


def test_a_folder_of_datasets_given_as_one_names_a_few_of_what_it_holds(tmp_path):
    for name in "abcdefghij":
        write(tmp_path / name)
    assert refused(tmp_path).endswith("; the folder holds a, b, c, d, e, f, g, h and 2 more")


def test_documents_without_an_id_field_are_named_with_their_fields_not_taken_for_an_empty_corpus(tmp_path):
    """A corpus of {"docid": ...} lines (MS MARCO's, pyserini's name) was refused as holding 'no document', and one
    of such lines among others was indexed under made-up ids, each relevant one then counted as missing from it."""
    root = write(tmp_path / "all")
    (root / "corpus.jsonl").write_text("".join(json.dumps({"docid": d["_id"], "text": d["text"]}) + "\n"
                                               for d in CORPUS), encoding="utf-8")
    assert refused(root) == (f"{root / 'corpus.jsonl'} holds no document with an id (a document's id is its '_id', "
                             "else its 'docno', 'id' or 'doc_id'; line 1's fields: 'docid', 'text'): every query "
                             "would score 0")
    some = write(tmp_path / "some")
    with open(some / "corpus.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"docid": "d3", "title": "", "text": "Sleep and memory."}) + "\n")
    assert load_dataset(some).warnings() == [
        f"1 document(s) of {some / 'corpus.jsonl'} have no id (such as line 3, whose fields are 'docid', 'title', "
        "'text'): a document's id is its '_id', else its 'docno', 'id' or 'doc_id'; the index gives each a made-up "
        "id, which no judgement names, so they are searched but never found relevant"]


@pytest.mark.parametrize("indent, line", [(None, "[{\"_id\": \"d1\", \"title\": \"Aspirin\", \"text"), (2, "[")])
def test_a_corpus_written_as_one_json_array_is_said_to_be_one(tmp_path, indent, line):
    """A corpus.jsonl holding a JSON array (json.dump's file, pretty-printed or not) was refused as holding 'no
    document (a JSON object a line, with its _id)', which a file of objects seems to be."""
    root = write(tmp_path / "d")
    (root / "corpus.jsonl").write_text(json.dumps(CORPUS, indent=indent), encoding="utf-8")
    assert refused(root) == (f"{root / 'corpus.jsonl'} holds no document (a JSON object a line, with its _id): every "
                             f"query would score 0; it is one JSON array (line 1: {line!r}), not JSON lines: write "
                             "each document's object on a line of its own")
    (root / "corpus.jsonl").write_text("_id,title,text\nd1,Aspirin,Daily aspirin\n", encoding="utf-8")
    assert refused(root).endswith("every query would score 0; line 1 is not a JSON object: '_id,title,text'")


@pytest.mark.parametrize("encoding, name", [("utf-16", "UTF-16"), ("utf-16-le", "UTF-16LE")])
def test_a_utf16_corpus_is_said_to_be_utf16_not_quoted_as_nul_bytes(tmp_path, encoding, name):
    """A corpus saved as UTF-16 (a Windows export) was refused as holding no document, quoting '\\x00"\\x00_\\x00i'."""
    root = write(tmp_path / "d")
    corpus = root / "corpus.jsonl"
    corpus.write_bytes(corpus.read_text(encoding="utf-8").encode(encoding))
    message = refused(root)
    assert message.startswith(f"{corpus}: the file is {name} text (") and "\\x00" not in message
    assert message.endswith(f"convert it to UTF-8 (iconv -f {name} -t UTF-8 FILE > NEW_FILE)")


def test_a_question_line_is_keyed_by_the_id_its_query_line_is(tmp_path):
    """A line holding both a ``qid`` and an ``_id`` was the query ``qid`` in queries.jsonl and the question ``_id``
    in questions.jsonl: its gold answer went to another query, or to none."""
    from flows.bench import answers
    from flows.queries import read_queries

    line = {"qid": "q7", "_id": "row-1", "text": "Who wrote Carmen?", "answer": "Bizet"}
    (tmp_path / "queries.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    (tmp_path / "questions.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    qids = read_queries(tmp_path / "queries.jsonl").column("qid").to_pylist()
    assert answers.load_gold(tmp_path / "questions.jsonl", qids) == {qids[0]: ["Bizet"]}
