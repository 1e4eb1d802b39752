"""A new user's own messy files through ``tessera ingest`` (in-process, BM25 only, real files in tmp_path): what
the first attempt at a corpus tends to hold, and what each case must give."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from flows.ingestion import ingest
from operators.store import Index

BM25_ONLY = {"dense": False}


def write_jsonl(path, records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def rows_by_doc(index_path) -> dict[str, dict]:
    index = Index.open(index_path)
    names = index.column_names()
    _, table = index.columns(names)
    return {row["doc_id"]: row for row in table.to_pylist()}


def test_a_jsonl_title_and_fields_missing_from_the_first_record_are_kept(tmp_path):
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, [{"_id": "a", "text": "apples are red"},
                       {"_id": "b", "title": "Banana split recipe", "text": "yellow fruit", "year": 2001}])
    ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    rows = rows_by_doc(tmp_path / "idx")
    assert (rows["b"]["title"], rows["b"]["year"]) == ("Banana split recipe", 2001)
    assert (rows["a"]["title"], rows["a"]["year"]) in (("", None), (None, None))
    assert Index.open(tmp_path / "idx").search_bm25(["banana recipe"], k=1)[0].docnos == ["b"]


def test_a_folder_of_records_leaves_its_hidden_files_out(tmp_path):
    """As the folder's kind is found, and as for text files: macOS' ``._a.jsonl`` (binary) and an editor's
    hidden copy are not the corpus."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", [{"_id": "a1", "text": "the visible file"}])
    write_jsonl(folder / ".b.jsonl", [{"_id": "b1", "text": "a hidden copy"}])
    (folder / "._a.jsonl").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X")
    report = ingest(folder, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (report.docs, report.failures) == (1, 0)
    assert set(rows_by_doc(tmp_path / "idx")) == {"a1"}
    csvs = tmp_path / "csvs"
    csvs.mkdir()
    (csvs / "a.csv").write_text("_id,text\nc1,visible\n")
    (csvs / ".b.csv").write_text("_id,text\nc2,hidden\n")
    report = ingest(csvs, tmp_path / "csv_idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert set(rows_by_doc(tmp_path / "csv_idx")) == {"c1"}


def test_a_field_of_a_number_in_one_file_and_text_in_the_next_is_text_in_every_shard(tmp_path):
    """Mixed types within a batch were already JSON text; across files (and shards) staging stopped with Arrow's
    internal 'Unable to merge' error. Shards of one document: the first is written before the text is met."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", [{"_id": "a1", "text": "an old report", "year": 1999, "tags": ["x"]},
                                     {"_id": "a2", "text": "a later report", "year": 2001, "tags": ["y"]}])
    write_jsonl(folder / "b.jsonl", [{"_id": "b1", "text": "a report of no known year", "year": "unknown",
                                      "tags": "x"}])
    for shard_size in (5000, 1):
        index = tmp_path / f"idx{shard_size}"
        report = ingest(folder, index, settings=BM25_ONLY, executor="local", chunk=False, progress=False,
                        shard_size=shard_size)
        assert (report.docs, report.failures) == (3, 0)
        rows = rows_by_doc(index)
        assert (rows["a1"]["year"], rows["a2"]["year"], rows["b1"]["year"]) == ("1999", "2001", "unknown")
        assert (rows["a1"]["tags"], rows["b1"]["tags"]) == ('["x"]', "x")
    csvs = tmp_path / "csvs"
    csvs.mkdir()
    (csvs / "a.csv").write_text("_id,text,year\nc1,old,1999\n")
    (csvs / "b.csv").write_text("_id,text,year\nc2,new,unknown\n")
    ingest(csvs, tmp_path / "csv_idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    rows = rows_by_doc(tmp_path / "csv_idx")
    assert (rows["c1"]["year"], rows["c2"]["year"]) == ("1999", "unknown")


def test_a_dictionary_column_in_one_parquet_file_and_plain_text_in_the_next_are_one_column(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "corpus"
    folder.mkdir()
    pq.write_table(pa.table({"_id": ["p1"], "text": ["red things"], "colour": pa.array(["red"]).dictionary_encode()}),
                   folder / "a.parquet")
    pq.write_table(pa.table({"_id": ["p2"], "text": ["blue things"], "colour": ["blue"]}), folder / "b.parquet")
    for shard_size in (5000, 1):
        index = tmp_path / f"idx{shard_size}"
        report = ingest(folder, index, settings=BM25_ONLY, executor="local", chunk=False, progress=False,
                        shard_size=shard_size)
        assert report.docs == 2
        rows = rows_by_doc(index)
        assert (rows["p1"]["colour"], rows["p2"]["colour"]) == ("red", "blue")


def test_a_title_or_field_edited_after_its_shard_finished_is_refused_as_a_changed_source(tmp_path):
    """cli.md: a file already ingested that changed since is refused, naming it; a changed title or metadata value
    was taken as the same documents (the shard digest read ids and texts alone) and the run said 'already done'."""
    import os

    import pytest

    from flows.ingestion.errors import SourceChangedError

    path = tmp_path / "docs.jsonl"
    records = [{"_id": "t1", "title": "Old title", "text": "body one", "year": 1999},
               {"_id": "t2", "title": "Second", "text": "body two", "tags": {"a": [1, 2.5]}}]
    write_jsonl(path, records)
    ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    os.utime(path, ns=(1, 1))  # the same documents, touched: read again and found the same
    report = ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (report.docs, report.shards_skipped) == (0, 1)
    for field, value in (("title", "New title"), ("year", 2024)):
        write_jsonl(path, [{**records[0], field: value}, records[1]])
        with pytest.raises(SourceChangedError, match=f"since the last ingest, changed: {path}"):
            ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert rows_by_doc(tmp_path / "idx")["t1"]["title"] == "Old title"


def test_a_csv_delimited_by_semicolons_is_a_failure_that_names_the_delimiter(tmp_path):
    """Excel's CSV in much of Europe: the header is one column '_id;title;text', and the failure said only 'no
    text column ...; set text_field'."""
    from flows.ingestion.ledger import Ledger

    path = tmp_path / "export.csv"
    path.write_text("_id;title;text\n1;Ice;glaciers move slowly\n")
    report = ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (report.docs, report.failures) == (0, 1)
    [failure] = Ledger(tmp_path / "idx").open_failures(Index.open(tmp_path / "idx").finished_shards())
    assert "separated by ';'" in failure.error and 'delimiter: ";"' in failure.error, failure.error
    assert "text_field" not in failure.error
    spec = {"steps": {"read": {"op": "sources.csv", "params": {"path": "x.csv", "delimiter": ";"}}}}  # as it says
    report = ingest(path, tmp_path / "idx2", spec=spec, settings=BM25_ONLY, executor="local", chunk=False,
                    progress=False)
    assert (report.docs, report.failures) == (1, 0)


def test_a_pdf_encrypted_with_no_user_password_is_read_and_one_with_a_password_is_a_failure(tmp_path, pdf_writer):
    """Many PDFs are encrypted with an owner password alone (against printing or copying), and every viewer opens
    them without asking; they were refused as 'encrypted; decrypt it first'."""
    from pypdf import PdfWriter

    from flows.ingestion.ledger import Ledger

    plain = pdf_writer(tmp_path / "plain.pdf", ["Kea are alpine parrots of the mountains."])
    folder = tmp_path / "pdfs"
    folder.mkdir()
    for name, user_password in (("open.pdf", ""), ("locked.pdf", "secret")):
        writer = PdfWriter(clone_from=plain)
        writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
        writer.write(folder / name)
    report = ingest(folder, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (report.docs, report.failures) == (1, 1)
    assert Index.open(tmp_path / "idx").search_bm25(["alpine parrots"], k=1)[0].docnos == ["open-p1"]
    [failure] = Ledger(tmp_path / "idx").open_failures(Index.open(tmp_path / "idx").finished_shards())
    assert failure.path.endswith("locked.pdf") and "password" in failure.error, failure.error


def test_a_scanned_pdf_says_it_has_no_text_layer_not_that_it_is_an_empty_file(tmp_path, monkeypatch, capsys,
                                                                             caplog):
    """A scan gives no document: the command's warning guessed 'an empty file, or a header line alone?', and the
    reader's line saying why (no text layer) was logged at INFO, which the command does not show."""
    import logging

    from pypdf import PdfWriter

    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    writer = PdfWriter()
    writer.add_blank_page(612, 792)
    writer.add_blank_page(612, 792)
    writer.write(tmp_path / "scan.pdf")
    caplog.set_level(logging.INFO)
    status = main(["ingest", "--source", str(tmp_path / "scan.pdf"), "--index", str(tmp_path / "idx"), "--no-dense",
                   "--executor", "local", "--quiet"])
    err = capsys.readouterr().err
    assert status == 0
    shown = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("scan.pdf" in m and "no text layer on any of its 2 page(s)" in m for m in shown), shown
    [warning] = [line for line in err.splitlines() if line.startswith("tessera: warning:")]
    assert "holds no documents" in warning and "without a text layer" in warning, warning


def test_records_without_ids_that_share_their_opening_fail_saying_their_id_is_a_content_id(tmp_path):
    """E-mails under one disclaimer: no id field, so each gets a content id (md5 of the title and the first 100
    characters), the same for all; the later ones failed as 'duplicate id ae4f130a0af2', an id the user never
    gave, with nothing saying why."""
    from flows.ingestion.ledger import Ledger

    header = ("Copyright 2020 ACME Corp. All rights reserved. This e-mail and any attachments are confidential "
              "and meant for its addressees alone. ")
    assert len(header) > 100
    path = tmp_path / "mails.jsonl"
    write_jsonl(path, [{"text": header + "Meeting moved to Tuesday."}, {"text": header + "Invoice 42 is overdue."}])
    csv = tmp_path / "mails.csv"
    csv.write_text("title,text\n" + "".join(f'Mail,"{header}{body}"\n' for body in ("One.", "Two.")))
    for source, first in ((path, f"{path}:1"), (csv, f"{csv}:2")):
        index = tmp_path / f"idx_{source.suffix[1:]}"
        report = ingest(source, index, settings=BM25_ONLY, executor="local", chunk=False, progress=False)
        assert (report.docs, report.failures) == (1, 1)
        [failure] = Ledger(index).open_failures(Index.open(index).finished_shards())
        assert f"first at {first}" in failure.error, failure.error
        assert "a content id" in failure.error and "first 100 characters" in failure.error, failure.error


def test_a_parquet_text_column_of_lists_is_its_json_text_as_in_jsonl(tmp_path):
    """A JSONL text that is a list is its JSON text; the same column in Parquet failed the whole file with Arrow's
    'Unsupported cast from list<element: string> to utf8 using function cast_string', its path said twice."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "sentences.parquet"
    pq.write_table(pa.table({"_id": ["s1", "s2"], "text": [["Kea are parrots.", "They live in the Alps."], None],
                             "title": ["Kea", "Huia"]}), path)
    report = ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (report.docs, report.failures) == (2, 0)
    rows = rows_by_doc(tmp_path / "idx")
    assert rows["s1"]["text"] == json.dumps(["Kea are parrots.", "They live in the Alps."])
    assert (rows["s2"]["title"], rows["s2"]["text"]) == ("Huia", "")


def test_a_file_that_cannot_be_read_is_named_once_by_its_absolute_path(tmp_path, monkeypatch, caplog):
    """A relative --source: the warning said 'left out: /abs/pdfs/broken.pdf: pdfs/broken.pdf: cannot read as a
    PDF ...' and the ledger's error named the relative path, which a retry from elsewhere cannot use."""
    import logging

    from flows.ingestion.ledger import Ledger

    monkeypatch.chdir(tmp_path)
    (tmp_path / "pdfs").mkdir()
    (tmp_path / "pdfs" / "broken.pdf").write_bytes(b"%PDF-1.4\nnot a PDF at all")
    caplog.set_level(logging.WARNING, logger="tessera.ingest")
    ingest("pdfs", tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    absolute = str(tmp_path / "pdfs" / "broken.pdf")
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("left out:")]
    assert line.startswith(f"left out: {absolute}: cannot read as a PDF"), line
    [failure] = Ledger(tmp_path / "idx").open_failures(Index.open(tmp_path / "idx").finished_shards())
    assert failure.error.startswith(f"{absolute}: cannot read as a PDF"), failure.error


def test_a_text_value_of_a_field_whose_values_mix_types_is_kept_as_it_is_not_quoted(tmp_path):
    """Within one batch a mixed field is JSON text; its strings were quoted ('"unknown"'), so a filter on the value
    the file holds (year: unknown) found nothing, and across files (text as it is) the same value differed."""
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, [{"_id": "a", "text": "an old report", "year": 1999},
                       {"_id": "b", "text": "a report of no known year", "year": "unknown"},
                       {"_id": "c", "text": "a tagged report", "year": ["x", 2]}])
    ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    rows = rows_by_doc(tmp_path / "idx")
    assert [rows[d]["year"] for d in "abc"] == ["1999", "unknown", '["x", 2]']
    import pyarrow.compute as pc

    hits = Index.open(tmp_path / "idx").search_bm25(["report"], k=5, where=pc.field("year") == "unknown")[0].docnos
    assert hits == ["b"]


def test_a_csv_whose_header_names_a_column_twice_is_a_failure_of_the_file_naming_it(tmp_path):
    """It stopped the ingest: 'tessera: internal error: KeyError: 'Field "text" exists 2 times in schema''."""
    from flows.ingestion.ledger import Ledger

    folder = tmp_path / "csvs"
    folder.mkdir()
    (folder / "a.csv").write_text("_id,text,text,note\n1,first,second,x\n")
    (folder / "b.csv").write_text("_id,text\n2,a good file\n")
    report = ingest(folder, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (report.docs, report.failures) == (1, 1)
    [failure] = Ledger(tmp_path / "idx").open_failures(Index.open(tmp_path / "idx").finished_shards())
    assert failure.path == str(folder / "a.csv") and "'text' twice (columns 2 and 3)" in failure.error, failure.error


def test_a_csv_whose_ids_are_in_a_doc_id_column_keeps_them(tmp_path):
    """doc_id is what Tessera itself calls a document's id; such a column was not taken as the id, so every
    document got a content id, and the column's values were then overwritten by that id: the ids were gone."""
    path = tmp_path / "docs.csv"
    path.write_text("doc_id,title,text\nDOC-001,First,alpha text\nDOC-002,Second,beta text\n")
    ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert sorted(rows_by_doc(tmp_path / "idx")) == ["DOC-001", "DOC-002"]
    assert Index.open(tmp_path / "idx").search_bm25(["beta"], k=1)[0].docnos == ["DOC-002"]


def test_fields_named_as_the_ingests_own_columns_are_left_out_saying_so(tmp_path, caplog):
    """A crawl's "_error" field made its document a failure with the crawl's error, and "chunk_index" was
    overwritten without a word."""
    import logging

    path = tmp_path / "crawl.jsonl"
    write_jsonl(path, [{"_id": "a", "text": "alpha text", "_error": "timeout while crawling", "_stage": "crawl",
                        "chunk_index": 7, "year": 2001},
                       {"_id": "b", "text": "beta text", "_error": None}])
    caplog.set_level(logging.WARNING, logger="tessera.ingest")
    report = ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local",
                    chunk={"unit": "tokens", "size": 64, "overlap": 0}, progress=False)
    assert (report.docs, report.failures) == (2, 0)
    rows = rows_by_doc(tmp_path / "idx")
    assert (rows["a"]["year"], rows["a"]["chunk_index"], "_error" in rows["a"]) == (2001, 0, False)
    [line] = [r.getMessage() for r in caplog.records if "are left out" in r.getMessage()]
    assert "_error, _stage, chunk_index are left out" in line and str(path) in line, line


def test_fields_named_as_the_columns_a_search_writes_are_left_out_saying_so(tmp_path, caplog):
    """A document's "score": 5 and "rank": 1 were stored and shown by tessera index documents, then replaced by the
    BM25 score and rank in every result; its "vector" was dropped; none of it was said."""
    import logging

    import pyarrow as pa

    from operators.registry import create

    path = tmp_path / "meta.jsonl"
    write_jsonl(path, [{"_id": "a", "text": "crows are clever birds", "score": 5, "rank": 1, "vector": [1, 2],
                        "qid": "Q-77", "query": "stored question", "year": 1999}])
    caplog.set_level(logging.WARNING, logger="tessera.ingest")
    ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    [line] = [r.getMessage() for r in caplog.records if "are left out" in r.getMessage()]
    assert "qid, query, rank, score, vector are left out" in line and "a search writes" in line, line
    row = rows_by_doc(tmp_path / "idx")["a"]
    assert row["year"] == 1999 and not {"score", "rank", "vector", "qid", "query"} & set(row), row
    hit = create("retrieve.bm25", {"index": str(tmp_path / "idx"), "k": 1}, step_id="bm25")(
        pa.table({"qid": ["1"], "query": ["crows"]})).to_pylist()[0]
    assert (hit["qid"], hit["rank"], hit["score"] != 5) == ("1", 1, True)


def test_fields_named_as_a_search_steps_scores_and_ranks_are_left_out_and_the_index_searches(tmp_path, caplog):
    """A ranking step's score_<step> and rank_<step> are the data model's (float, int32): a document's
    "score_bm25": 5 (an integer) or "score_card": "gold" was stored, and every search of the index then failed
    (transform wrote a column of another type than the data model's), in tessera run and the service alike."""
    import logging

    import pyarrow as pa

    from operators.registry import create

    path = tmp_path / "meta.jsonl"
    write_jsonl(path, [{"_id": "a", "text": "crows are clever birds", "score_bm25": 5, "rank_dense": 2,
                        "score_card": "gold", "year": 1999}])
    caplog.set_level(logging.WARNING, logger="tessera.ingest")
    ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    [line] = [r.getMessage() for r in caplog.records if "are left out" in r.getMessage()]
    assert "rank_dense, score_bm25, score_card are left out" in line and "score_*, rank_*" in line, line
    row = rows_by_doc(tmp_path / "idx")["a"]
    assert row["year"] == 1999 and not {"score_bm25", "rank_dense", "score_card"} & set(row), row
    hit = create("retrieve.bm25", {"index": str(tmp_path / "idx"), "k": 1}, step_id="bm25")(
        pa.table({"qid": ["1"], "query": ["crows"]})).to_pylist()[0]
    assert (hit["docno"], hit["rank"], hit["year"]) == ("a", 1, 1999)


def test_documents_with_qid_or_query_fields_do_not_take_the_place_of_the_queries(tmp_path):
    """A document's "qid" replaced each result's query id: two queries' hits were one query's (the run said
    '1 query', both queries 'no results')."""
    import pyarrow as pa

    from operators.registry import create

    path = tmp_path / "docs.jsonl"
    write_jsonl(path, [{"_id": "a", "text": "alpha text", "qid": "q", "query": "stored question"},
                       {"_id": "b", "text": "beta text", "qid": "q", "query": "stored question"}])
    ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    retriever = create("retrieve.bm25", {"index": str(tmp_path / "idx"), "k": 5}, step_id="bm25")
    out = retriever(pa.table({"qid": ["1", "2"], "query": ["alpha", "beta"]}))
    assert [(r["qid"], r["query"], r["docno"]) for r in out.to_pylist()] == [("1", "alpha", "a"),
                                                                              ("2", "beta", "b")]


def test_a_json_array_in_a_jsonl_file_is_a_failure_that_says_what_the_file_holds(tmp_path):
    """It said 'a JSON list, not an object' for a file of documents in one array (and '1 document(s) failed')."""
    from flows.ingestion.ledger import Ledger

    docs = [{"_id": "a", "text": "one"}, {"_id": "b", "text": "two"}]
    for name, text in (("indented.jsonl", json.dumps(docs, indent=1)), ("one_line.jsonl", json.dumps(docs))):
        (tmp_path / name).write_text(text)  # indented: each of its 10 lines was a failure ('not valid JSON')
        index = tmp_path / f"idx_{name}"
        report = ingest(tmp_path / name, index, settings=BM25_ONLY, executor="local", chunk=False, progress=False)
        assert (report.docs, report.failures) == (0, 1)
        [failure] = Ledger(index).open_failures(Index.open(index).finished_shards())
        assert "holds a JSON array: JSONL holds one object per line" in failure.error, failure.error
        assert failure.path == str(tmp_path / name)


def test_jsonl_files_that_each_began_with_a_byte_order_mark_joined_into_one_are_read_whole(tmp_path):
    """`cat a.jsonl b.jsonl` of files a Windows tool wrote with a BOM: line 2 was a failure ('Unexpected UTF-8 BOM
    (decode using utf-8-sig)'), in an ingest and in a flow's read step, though --retry-failed read it."""
    from operators.registry import create

    path = tmp_path / "joined.jsonl"
    path.write_bytes(b"".join(b"\xef\xbb\xbf" + json.dumps({"_id": i, "text": t}).encode() + b"\r\n"
                              for i, t in (("a", "hyena den"), ("b", "civet tree"))))
    assert [r["docno"] for r in create("sources.jsonl", {"path": str(path)})(pa.table({})).to_pylist()] == ["a", "b"]
    report = ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (report.docs, report.failures) == (2, 0)
    assert Index.open(tmp_path / "idx").search_bm25(["civet"], k=1)[0].docnos == ["b"]


def test_objects_pretty_printed_over_several_lines_are_a_failure_of_the_file_that_says_so(tmp_path):
    """A ``.jsonl`` file of objects written with ``json.dumps(indent=2)`` (or ``jq``'s default): each of its lines was
    a failure ('not valid JSON (Expecting property name ...)', 'Extra data'), 6 a document, none saying why; in a
    flow's read step and ``tessera index add`` too."""
    from flows.ingestion.ledger import Ledger
    from operators.errors import SourceError
    from operators.registry import create

    docs = [{"_id": "a", "title": "Hyenas", "text": "Spotted hyenas live in clans."},
            {"_id": "b", "title": "Civets", "text": "Civets are nocturnal."}]
    path = tmp_path / "pretty.jsonl"
    path.write_text("\n".join(json.dumps(d, indent=2) for d in docs) + "\n")
    report = ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (report.docs, report.failures) == (0, 1)
    [failure] = Ledger(tmp_path / "idx").open_failures(Index.open(tmp_path / "idx").finished_shards())
    assert failure.error == (f"{path}: the file holds JSON objects written over several lines (pretty-printed): JSONL "
                             "holds one object per line (write it so, e.g. jq -c . FILE > NEW_FILE.jsonl)")
    with pytest.raises(SourceError, match="line 1: the file holds JSON objects written over several lines"):
        create("sources.jsonl", {"path": str(path)})(pa.table({}))
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))  # one a line: read
    assert ingest(path, tmp_path / "idx2", settings=BM25_ONLY, executor="local", chunk=False, progress=False).docs == 2


def test_rows_without_text_of_a_second_source_are_said_once(tmp_path, caplog):
    """A second CSV (or Parquet, or documents given to ``Index.add``) source of an index is read once to compare it
    with the first (was it moved?), then staged: "skipped 1 document(s) with an empty text" was said twice."""
    import logging

    (tmp_path / "a.csv").write_text("_id,text\na1,Aardvarks dig burrows.\n")
    (tmp_path / "b.csv").write_text("_id,text\nb1,Badgers dig setts.\nb2,\n")
    ingest(tmp_path / "a.csv", tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    caplog.clear()
    caplog.set_level(logging.WARNING)
    report = ingest(tmp_path / "b.csv", tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False,
                    progress=False)
    assert report.docs == 1
    said = [m for m in caplog.messages if "with an empty text" in m]
    assert said == [f"sources.csv [read]: skipped 1 document(s) with an empty text in {tmp_path / 'b.csv'}"], said
