"""``tessera run`` over the query files users bring: a problem in the file is one error naming the file and the
line (or row) it is on, before anything runs; a qid a TREC ``--out`` cannot hold is refused before the run, not
after it; ``--top`` larger than any table is every row. The flow is BM25 over the sample corpus
(``retrieve.corpus_bm25``: no model, no index to build)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.flows.test_cli_scripting import one_error, spec, tessera  # noqa: F401 - fixtures
from tests.text_checks import TRACEBACK


@pytest.mark.parametrize("name, body, said", [
    ("dup.tsv", b"qid\tquery\nq1\thoney bees\nq2\topera\n\nq1\tcathedrals\n",
     "dup.tsv:5: qid 'q1' appears twice (first at "),
    ("blank.jsonl", b'{"_id": "q1", "text": "honey"}\r\n{"_id": "q2", "text": "  "}\r\n',
     "blank.jsonl:2: query 'q2' is empty"),
    ("latin1.txt", b"honey bees\ncaf\xe9 music\n", "latin1.txt:2: not UTF-8 text (byte 0xe9 at byte 15 of the file)"),
    ("noid.tsv", b"q1\thoney bees\n\topera singers\n", "noid.tsv:2: the qid is empty"),
    ("noid.jsonl", b'{"_id": "", "text": "honey"}\n', "noid.jsonl:1: the qid is empty"),
    ("surrogate.jsonl", b'{"_id": "q1", "text": "honey bees"}\n{"_id": "q2", "text": "opera \\ud800"}\n',
     "surrogate.jsonl:2: text holds a lone surrogate (\\ud800) at character 6"),  # was: internal error, exit 1
    ("surrogate.json", b'[{"_id": "q1", "text": "honey", "messages": [{"role": "user", "content": "\\udfff"}]}]',
     "surrogate.json: query 1 of the array: messages.0.content holds a lone surrogate (\\udfff)"),
    # UTF-16 (Windows' "Unicode"): with its mark the hint said iconv -f latin1; without it, every query held NULs
    ("utf16.txt", "honey bees\nopera\n".encode("utf-16"),
     "utf16.txt: the queries file is UTF-16 text (it starts with its byte-order mark); save it as UTF-8 (iconv -f "
     "UTF-16 -t UTF-8 FILE > NEW_FILE)"),
    ("utf16le.jsonl", '{"_id": "q1", "text": "honey"}\n'.encode("utf-16-le"),
     "utf16le.jsonl: the queries file is UTF-16LE text (every other byte is NUL)"),
])
def test_a_bad_query_is_named_by_its_line(tmp_path, spec, tessera, name, body, said):  # noqa: F811
    queries = tmp_path / name
    queries.write_bytes(body)
    status, out, err = tessera("run", str(spec), "-q", str(queries), "--no-cache", home=tmp_path / "home")
    assert status == 2 and out == ""
    one_error(err, "field '--queries'", said)


def test_a_parquet_row_without_qid_or_text_is_named_not_dropped(tmp_path, spec, tessera):  # noqa: F811
    queries = tmp_path / "q.parquet"
    pq.write_table(pa.table({"qid": ["q1", "q2"], "query": ["honey bees", None]}), queries)
    status, _, err = tessera("run", str(spec), "-q", str(queries), "--no-cache", home=tmp_path / "home")
    assert status == 2
    one_error(err, "q.parquet: row 2: query 'q2' is empty")  # was: q2 left out, the run went on without it
    pq.write_table(pa.table({"qid": ["q1", None], "query": ["honey bees", "opera"]}), queries)
    status, _, err = tessera("run", str(spec), "-q", str(queries), "--no-cache", home=tmp_path / "home")
    assert status == 2
    one_error(err, "q.parquet: row 2: the qid is empty")  # was: searched as the qid 'None'


def test_a_qid_a_trec_run_cannot_hold_is_refused_before_the_run(tmp_path, spec, tessera):  # noqa: F811
    queries, out = tmp_path / "q.tsv", tmp_path / "run.trec"
    queries.write_text("q1\thoney bees\nq 2\topera singers\n")
    status, stdout, err = tessera("run", str(spec), "-q", str(queries), "--no-cache", "--out", str(out),
                                  home=tmp_path / "home")
    assert status == 2 and stdout == "" and not out.exists()
    # one line: no step ran first (a step that ran prints '[1/1] bm25 ... done' on stderr before the error)
    one_error(err, "field '--out'", "the qid 'q 2'", ".parquet, .jsonl or .csv keeps it")
    status, _, _ = tessera("run", str(spec), "-q", str(queries), "--no-cache", "--quiet", "--out",
                           str(tmp_path / "run.jsonl"), home=tmp_path / "home")
    assert status == 0


def test_top_beyond_any_table_shows_every_row(tmp_path, spec, tessera):  # noqa: F811
    huge = str(10**20)  # more than a C long, which a table slice takes
    status, out, err = tessera("run", str(spec), "-q", "honey bees", "--no-cache", "--top", huge,
                               home=tmp_path / "home")
    assert status == 0, err
    assert "1: honey bees" in out and "more rows" not in out
    status, out, err = tessera("run", str(spec), "-q", "honey bees", "--no-cache", "--top", huge, "--json",
                               home=tmp_path / "home")
    assert status == 0, err
    assert len(json.loads(out)["rows"]) == 3  # the spec's k


def test_out_naming_the_queries_file_is_refused_and_the_queries_kept(tmp_path, spec, tessera):  # noqa: F811
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"_id": "q1", "text": "honey bees"}\n')
    (tmp_path / "link.jsonl").symlink_to(queries)
    for out in (queries, tmp_path / "link.jsonl"):
        status, _, err = tessera("run", str(spec), "-q", str(queries), "--no-cache", "--out", str(out),
                                 home=tmp_path / "home")
        assert status == 2
        one_error(err, "field '--out'", "is the --queries file")
        assert queries.read_text() == '{"_id": "q1", "text": "honey bees"}\n'  # was: replaced by the results


def test_control_characters_of_a_query_are_shown_not_sent_to_the_terminal(tmp_path, spec, tessera):  # noqa: F811
    """A query's ESC sequence and NUL reached the terminal raw in the table's title (recolouring or rewriting it);
    they are searched as given and printed as visible escapes."""
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"_id": "q1", "text": "honey\x00bees\x1b[31m"}) + "\n")
    status, out, err = tessera("run", str(spec), "-q", str(queries), "--no-cache", home=tmp_path / "home")
    assert status == 0 and TRACEBACK not in err
    assert "\x1b" not in out and "\x00" not in out
    assert "q1: honey\\x00bees\\x1b[31m" in out


def test_a_long_query_is_shown_on_a_few_lines_and_a_query_without_results_is_counted(tmp_path, spec, tessera):  # noqa: F811
    """A 10,000-character query's table title filled 300 lines; the summary counted only the queries with rows."""
    queries = tmp_path / "q.jsonl"
    long_query = "honey " * 1600
    queries.write_text(json.dumps({"_id": "q1", "text": long_query}) + "\n"
                       + json.dumps({"_id": "q2", "text": "zyxwvut"}) + "\n")
    status, out, err = tessera("run", str(spec), "-q", str(queries), "--no-cache", "--top", "1",
                               home=tmp_path / "home")
    assert status == 0, err
    assert "q1: honey honey" in out and out.count("honey") < 60 and "…" in out
    assert "q2: zyxwvut  no results" in out
    assert "2 queries (1 with no results)" in " ".join(out.split())  # rich wraps the summary on a narrow terminal


def test_several_query_texts_are_several_queries_in_order(tmp_path, spec, tessera):  # noqa: F811
    """``-q 'first' -q 'second'`` was refused by argparse ('unrecognized arguments' for a second text); each text
    is now a query, numbered 1, 2, ... as a .txt file's lines are."""
    status, out, err = tessera("run", str(spec), "-q", "honey bees", "-q", " opera singers ", "--no-cache",
                               "--json", home=tmp_path / "home")
    assert status == 0, err
    rows = json.loads(out)["rows"]
    assert [r["qid"] for r in rows] == ["1"] * 3 + ["2"] * 3
    assert {r["qid"]: r["query"] for r in rows} == {"1": "honey bees", "2": "opera singers"}


@pytest.mark.parametrize("second, said", [
    ("data/sample/questions.jsonl", "--queries #2 ('data/sample/questions.jsonl') is a queries file or '-'"),
    ("-", "--queries #2 ('-') is a queries file or '-'"),
    ("   ", "--queries #2: query '2' is empty"),
])
def test_a_file_or_an_empty_text_among_several_queries_is_refused(tmp_path, spec, tessera, second, said):  # noqa: F811
    status, out, err = tessera("run", str(spec), "-q", "honey bees", "-q", second, "--no-cache",
                               home=tmp_path / "home")
    assert status == 2 and out == ""
    one_error(err, "field '--queries'", said)


def test_a_question_wider_than_its_table_is_one_line(tmp_path, spec, tessera):  # noqa: F811
    """The question was the table's title, wrapped at the table's width (about 40 columns for rank, docno, title
    and score): "1: which honey bees live in ... colonies of the\\nnorth?" on two padded lines."""
    question = "which honey bees live in colonies of thousands in the forests of the north?"
    status, out, err = tessera("run", str(spec), "-q", question, "--no-cache", home=tmp_path / "home")
    assert status == 0, err
    assert f"1: {question}\n" in out


def test_a_text_named_like_a_queries_file_that_is_not_there_is_searched_with_a_note(tmp_path, spec, tessera,  # noqa: F811
                                                                                     caplog):
    """``-q "my queries.jsonl"`` (a file's name with a space, mistyped or elsewhere) was searched as a question
    without a word: the ranked results of 'my queries.jsonl' looked like a run over the file. The note is a
    record of the flows logger, which the console script prints as ``tessera: ...`` (hidden by --quiet)."""
    import logging

    from tests.flows.test_cli_scripting import REPO

    caplog.set_level(logging.WARNING, logger="flows.queries")
    status, out, _ = tessera("run", str(spec), "-q", "my queries.jsonl", "--no-cache", home=tmp_path / "home")
    assert status == 0 and "1: my queries.jsonl" in out
    assert [(r.getMessage(), r.note) for r in caplog.records if r.name == "flows.queries"] == [
        (f"--queries 'my queries.jsonl' is no file in {REPO}: it is searched as one query's text", True)]
    for question in ("honey bees", "what is a .csv"):
        caplog.clear()
        assert tessera("run", str(spec), "-q", question, "--no-cache", home=tmp_path / "home")[0] == 0
        assert [r for r in caplog.records if r.name == "flows.queries"] == [], question
