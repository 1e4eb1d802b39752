"""A CSV file uploaded to ``POST /v1/indices/{name}/files`` (``serve.indices.csv_upload``): its rows are the documents
``tessera ingest`` makes of the same file (read by the same reader, ``sources.csv``: ids from ``_id``, ``docno``,
``id`` or ``doc_id``, else content ids; ``text``; ``title``; the other columns metadata), and a file it cannot read
(no text column, a quote never closed, a row of other fields, an id twice, ...) is a 422 naming the file and the
line, before anything is written or queued: the index keeps what it holds. The upload page refused CSV files though
``tessera ingest`` reads them."""

from __future__ import annotations

import pytest
import requests

from serve.indices.documents import file_documents, files_request
from serve.http.errors import ApiError
from serve.service_settings import Limits

BIRDS = ("id,title,text,year,rating,draft,seen,Common name\n"
         'kaka,Kākā,"Kākā are forest parrots, louder than kea.",2023,4.5,true,2024-05-01,bush parrot\n'
         ",,,2020,,,,\n"
         "weka,Weka,Weka are flightless rails.,2021,3,false,2024-06-01,woodhen\n"
         ",,A row without an id gets a content id.,1999,,,,\n").encode()


def test_a_csv_upload_gives_the_documents_tessera_ingest_indexes_from_the_same_file(tmp_path):
    """The doc-store rows of the file ingested from disk and of its upload (the JSONL file an upload's task ingests)
    are the same, but for what a document sent as JSON cannot hold: a column whose name no metadata column may have
    (left out, said in a warning), and a date (its ISO text)."""
    from flows.ingestion import ingest
    from operators.store import Index
    from serve.indices.documents import write_jsonl

    (tmp_path / "birds.csv").write_bytes(BIRDS)
    ingest(tmp_path / "birds.csv", tmp_path / "cli", settings={"dense": False}, executor="local", chunk=False,
           progress=False)
    request, replaced, warnings = files_request([("birds.csv", BIRDS)], None, False, None, Limits())
    write_jsonl(tmp_path / "upload.jsonl", request.documents)
    ingest(tmp_path / "upload.jsonl", tmp_path / "up", settings={"dense": False}, executor="local", chunk=False,
           progress=False)

    def rows(index) -> list[dict]:
        return Index.open(index).columns(Index.open(index).column_names())[1].to_pylist()

    cli = [{k: v.isoformat() if k == "seen" and v else v for k, v in row.items() if k != "Common name"}
           for row in rows(tmp_path / "cli")]
    assert cli == rows(tmp_path / "up")
    assert [(r["doc_id"], r["title"], r["year"], r["rating"], r["draft"], r["seen"]) for r in cli] == [
        ("kaka", "Kākā", 2023, 4.5, True, "2024-05-01"), ("weka", "Weka", 2021, 3.0, False, "2024-06-01"),
        (cli[2]["doc_id"], "", 1999, None, None, None)]
    assert len(cli[2]["doc_id"]) == 12 and replaced == ["birds.csv"]  # a content id, as tessera ingest gives it
    assert warnings == [
        "birds.csv: column(s) Common name left out: a metadata column's name is ASCII letters, digits and _ (64 at "
        "most), starting with a letter, and none of _id, chunk_id, chunk_index, doc_id, docno, id, qid, query, rank, "
        "score, text, title, total_chunks, vector, nor starting with score_ or rank_ (a search's scores and ranks)",
        "birds.csv: 1 row(s) without a text or a title left out, as tessera ingest leaves them out"]


@pytest.mark.parametrize("content,text,said,logged", [
    ("id,text\nm1,Crème brûlée à la carte\n".encode("cp1252"), "Crème brûlée à la carte",
     "menu.csv: not UTF-8; read as cp1252, the encoding guessed for it (if its text looks wrong, save it as UTF-8 and "
     "send it again)", "not UTF-8 (byte 0xe8): read as cp1252"),
    ("id,text\nm1,Crème brûlée à la carte ".encode() + b"\x81\n",
     "Crème brûlée à la carte \ufffd",
     "menu.csv: UTF-8 text with a byte that is not UTF-8 (0x81): read as UTF-8, each such byte as U+FFFD (if its "
     "text looks wrong, save it as UTF-8 and send it again)", "UTF-8 text with a byte that is not UTF-8 (0x81)"),
])
def test_a_csv_file_not_in_utf8_is_read_as_tessera_ingest_reads_it_said_in_a_warning_and_logged_once(
        content, text, said, logged, caplog):
    """The client is told how the file was read; the service's log says it once, naming the client's file (the
    upload read its copy a second time to learn the encoding, which logged the reader's warning again, naming a
    temporary file upload.csv)."""
    warnings: list[str] = []
    with caplog.at_level("WARNING"):
        [menu] = file_documents("menu.csv", content, Limits(), warnings=warnings)
    assert (menu["id"], menu["text"]) == ("m1", text)
    assert warnings == [said]
    [record] = [r.getMessage() for r in caplog.records if logged in r.getMessage()]
    assert "/menu.csv: " in record


@pytest.mark.parametrize("name,content,words", [
    ("notes.csv", b"id,body\na,hello\n", "files: notes.csv: no text column 'text' (columns: 'id', 'body'); an "
     "upload reads a row's text from its column 'text' (its id from '_id', 'docno', 'id' or 'doc_id', its title from "
     "'title'): rename the column that holds it; nothing of this request was added"),
    ("open.csv", b'id,text\na,"never closed\nb,fine\n', "files: open.csv, line 2: a quote opened on line 2 is never "
     "closed (the file ends inside it); nothing of this request was added"),
    ("wide.csv", b"id,text\na,x\nb,y,z\n", "files: wide.csv, line 3: 3 field(s) where the header has 2 (id, text)"),
    ("twice.csv", b"id,text\na,x\nb,y\na,z\n", "files: twice.csv, line 4: the id 'a' is given twice (also line 2)"),
    ("excel.csv", b"id;text\na;x\n", "files: excel.csv: the header row is one column, 'id;text': its fields are "
     "separated by ';', not ','; an upload reads fields separated by ',': save the file so"),
    ("wide16.csv", "id,text\na,x\n".encode("utf-16"), "files: wide16.csv: the file is UTF-16 text"),
    ("empty.csv", b"", "files: 'empty.csv' has no row with a text"),
    ("header.csv", b"id,text\n", "files: 'header.csv' has no row with a text"),
    ("titled.csv", b"id,title,text\na,A title,\n", "files: titled.csv, line 2: the row has a title and no text"),
    ("long.csv", b"id,text\n" + b"x" * 201 + b",y\n", "files: long.csv, line 2: id: String should have at most 200"),
    ("dots.csv", b"id,text\n..,y\n", "files: dots.csv, line 2: id: the id '..' cannot be read back"),
])
def test_a_csv_file_that_gives_no_documents_is_a_422_naming_it_and_the_line(name, content, words):
    with pytest.raises(ApiError) as err:
        file_documents(name, content, Limits())
    assert (err.value.status, err.value.code, err.value.param) == (422, "invalid_file", "files")
    assert words in err.value.message, err.value.message
    assert "--" not in err.value.message and "spec" not in err.value.message  # no advice of tessera ingest's flags


def test_a_csv_file_of_more_rows_than_a_request_may_add_is_a_422_with_their_count_and_is_sent_in_parts():
    """It was a 422 that said to split the file by hand, which the web UI could not do: now it gives the count of
    rows, and the file sent again with first_row is that part of its rows, as a PDF's pages are sent."""
    rows = b"id,text,\xe9tat\n" + b"".join(b"r%d,row %d,x\n" % (n, n) for n in range(7)) + b",,\n"
    most = Limits(max_documents_per_request=3)
    with pytest.raises(ApiError) as err:
        file_documents("many.csv", rows, most)
    assert (err.value.status, err.value.code, err.value.param, err.value.extra) == (
        422, "too_many_rows", "files", {"rows": 7})
    assert err.value.message == ("files: 'many.csv' has 7 rows with a text, over the limit "
                                 "max_documents_per_request=3; send it in parts, each with the form field first_row "
                                 "(1, then 4, ...), as the web UI does")
    parts, warnings = [], []
    for first in (1, 4, 7):
        said: list[str] = []
        parts.append([doc["id"] for doc in file_documents("many.csv", rows, most, warnings=said, first_row=first)])
        warnings.append(len(said))
    assert parts == [["r0", "r1", "r2"], ["r3", "r4", "r5"], ["r6"]]
    assert warnings == [3, 0, 0]  # the encoding, the column left out, the empty row: with the first part alone
    with pytest.raises(ApiError) as err:
        file_documents("many.csv", rows, most, first_row=8)
    assert (err.value.param, err.value.message) == ("first_row", "first_row: 8 is past the last of the 7 rows with "
                                                                 "a text of 'many.csv'")
    bad = rows.replace(b"r5,row 5,x", b"r5,row 5")  # a bad row in the second part refuses the first
    with pytest.raises(ApiError) as err:
        file_documents("many.csv", bad, most, first_row=1)
    assert (err.value.code, err.value.message[:28]) == ("invalid_file", "files: many.csv, line 7: 2 f")
    assert len(file_documents("three.csv", rows.split(b"r3,", 1)[0], most)) == 3


def test_first_row_is_a_row_number_sent_with_a_lone_csv_file():
    with pytest.raises(ApiError) as err:
        files_request([("a.csv", b"id,text\nr,x\n"), ("b.csv", b"id,text\ns,y\n")], None, False, None, Limits(), 1)
    assert (err.value.param, err.value.message) == ("first_row", "first_row: a part of a CSV file is sent with that "
                                                                 "file alone")
    with pytest.raises(ApiError) as err:
        files_request([("notes.txt", b"Bees.")], None, False, None, Limits(), 1)
    assert err.value.param == "first_row"
    request, replaced, _ = files_request([("a.csv", b"id,text\nr,x\ns,y\n")], None, True, None,
                                         Limits(max_documents_per_request=1), 2)
    assert [doc.id for doc in request.documents] == ["s"] and replaced == []  # a later part keeps the earlier ones


@pytest.mark.integration
@pytest.mark.slow  # MiniLM loads and ingests in this process
def test_a_csv_upload_adds_its_rows_and_a_refused_one_leaves_the_index_as_it_was(upload_service):
    """The rows go in as the task ingests them; then a bad CSV, and one whose metadata the index's column cannot
    take, are refused over real HTTP (the API's app under uvicorn, without Ray), replace or not: no task, no file
    under uploads/, every document still there."""
    from serve.tasks.ingest_task import run_ingest
    from tests.serve.conftest import api_on_localhost

    service = upload_service
    queued = service.indices.add_files("birds", [("birds.csv", BIRDS)], None, False, "local")
    assert queued["documents"] == 3 and queued["warnings"][1].startswith("birds.csv: 1 row(s) without a text")
    run_ingest(service.store, queued["task_id"], service.store.task(queued["task_id"], None)["spec"]["ingest"])
    before = service.indices.documents("birds", "local", 0, 10)
    assert [(d["id"], d["title"], d["metadata"].get("year")) for d in before["documents"][:2]] == [
        ("kaka", "Kākā", 2023), ("weka", "Weka", 2021)] and before["total"] == 3
    tasks = len(service.store.list_tasks("local"))
    with api_on_localhost() as base:
        for name, content, code, words in (
                ("birds.csv", b"id,text,year\nkaka,x,2024\nweka,y\n", "invalid_file",
                 "files: birds.csv, line 3: 2 field(s) where the header has 3"),
                ("years.csv", b"id,text,year\nkea,x,unknown\n", "metadata_type_conflict",
                 "document 'kea': metadata 'year' is string (\"unknown\"), but index 'birds' holds column 'year' as "
                 "int64")):
            for replace in ("false", "true"):
                answer = requests.post(f"{base}/v1/indices/birds/files", files=[("files", (name, content))],
                                       data={"replace": replace}, timeout=60)
                assert answer.status_code == 422, answer.text
                error = answer.json()["error"]
                assert (error["code"], error["param"]) == (code, "files") and error["message"].startswith(words), error
    assert service.indices.documents("birds", "local", 0, 10) == before
    assert len(service.store.list_tasks("local")) == tasks
    assert not list((service.indices.uploads / "birds").glob("*"))
