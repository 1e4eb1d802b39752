"""The Indices tab's Add before and while it sends: what the page refuses before sending anything (a file it cannot
add, a file or a document too large for any request, a JSONL line it cannot read, an id given twice, a pasted text
without an id, an index name of spaces, nothing chosen), each with the focus on the field it names, an upload
over the service's limits sent in parts, after which the index holds every document, and an upload's progress by
its passages, still followed on the Indices tab after a reload of the page."""

from __future__ import annotations

import json
import re
import secrets

import pytest
from selenium.webdriver.common.by import By

from tests.ui.browser import by_id, error_text, open_page, set_text, wait
from tests.ui.conftest import UPLOAD_LIMITS

pytestmark = [pytest.mark.ray, pytest.mark.integration]

MAX_BODY_BYTES = 1_000_000  # the service's default, which the app keeps


def open_indices(driver, service) -> None:
    """The Indices tab with the listing read (its limits are what the page splits and refuses by)."""
    open_page(driver, service)
    driver.find_element(By.CSS_SELECTOR, 'nav button[data-tab="indices"]').click()
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#upload-spec option"))


def choose(driver, *paths) -> None:
    """The files field holding ``paths`` only (what an earlier choice left is cleared first)."""
    field = by_id(driver, "upload-files")
    driver.execute_script("arguments[0].value = ''", field)
    if paths:
        field.send_keys("\n".join(str(path) for path in paths))


def focused(driver) -> str:
    """The id of the element that has the focus."""
    return driver.switch_to.active_element.get_attribute("id")


def refused(driver) -> str:
    """Add pressed: the error the page shows."""
    by_id(driver, "upload-button").click()
    return wait(driver, lambda d: error_text(d))


def text_of(size: int, word: str) -> str:
    """``size`` bytes of sentences about ``word``, a line each."""
    lines, n = [], 0
    while sum(map(len, lines)) < size:
        lines.append(f"Line {n} tells of the {word} and where it lives in the hills.\n")
        n += 1
    return "".join(lines)[:size]


def test_what_the_page_refuses_before_sending_anything(browser, ui_app, tmp_path):
    name = "ui-refused-" + secrets.token_hex(3)
    notes = tmp_path / "notes.jsonl"
    notes.write_text(json.dumps({"_id": "kea", "text": "Kea are alpine parrots."}) + "\n")
    (tmp_path / "report.docx").write_bytes(b"PK\x03\x04 a word file")
    (tmp_path / "big.md").write_text("x" * (UPLOAD_LIMITS["max_upload_bytes"] + 1))
    (tmp_path / "edge.md").write_text("y" * (UPLOAD_LIMITS["max_upload_bytes"] - 100))  # fits, not with its form
    (tmp_path / "huge.jsonl").write_text(json.dumps({"_id": "huge", "text": "z" * MAX_BODY_BYTES}) + "\n")
    (tmp_path / "broken.jsonl").write_text(json.dumps({"_id": "a", "text": "fine"}) + "\n{not json\n")
    # Chromium's newer message for this line gives no position ("Unexpected token 'o', ..."): the page finds it
    (tmp_path / "oops.jsonl").write_text(json.dumps({"_id": "j1", "text": "fine"}) + '\n{"_id":"j2", "text": oops}\n')
    (tmp_path / "dup.jsonl").write_text("".join(json.dumps({"_id": "d1", "text": t}) + "\n" for t in ("a", "b")))
    (tmp_path / "anonymous.jsonl").write_text(json.dumps({"title": "No id", "text": "Nobody named me."}) + "\n")
    tasks_before = ui_app.api("GET", "/tasks").json()["counts"]
    open_indices(browser, ui_app)
    set_text(browser, "upload-index", name)
    limit = UPLOAD_LIMITS["max_upload_bytes"]

    choose(browser, notes, tmp_path / "report.docx")  # the JSONL would have gone first, then the file refused
    assert refused(browser) == ("report.docx: not a PDF, text, Markdown, HTML, CSV, JSONL or JSON file (.pdf, .txt, "
                                ".md, .markdown, .html, .htm, .csv, .jsonl, .json) (field: files)")
    assert focused(browser) == "upload-files"  # the field it names (it went to the index box)
    choose(browser, notes, tmp_path / "big.md")
    assert refused(browser) == f"big.md: {limit + 1} bytes, over the service's max_upload_bytes ({limit}) " \
                               "(field: files)"
    choose(browser, notes, tmp_path / "edge.md")
    assert refused(browser) == f"edge.md: {limit - 100} bytes, with the form around it over the service's " \
                               f"max_upload_bytes ({limit}) (field: files)"
    choose(browser, notes, tmp_path / "huge.jsonl")
    huge = len(json.dumps({"id": "huge", "title": "", "text": "z" * MAX_BODY_BYTES}, separators=(",", ":")))
    assert refused(browser) == f"document 'huge': {huge} bytes as JSON, over what one request may carry, the " \
                               f"service's max_body_bytes ({MAX_BODY_BYTES}) (field: files)"
    assert focused(browser) == "upload-files"
    choose(browser, notes, tmp_path / "broken.jsonl")
    broken = refused(browser)  # the file's line and column, not also the browser's "(line 1 column 2)"
    assert broken.startswith("broken.jsonl, line 2, column 2: not valid JSON (") and "line 1" not in broken
    assert focused(browser) == "upload-files"
    choose(browser, notes, tmp_path / "oops.jsonl")
    assert refused(browser).startswith("oops.jsonl, line 2, column 22: not valid JSON (")
    choose(browser, tmp_path / "anonymous.jsonl")
    assert refused(browser) == "anonymous.jsonl, line 1: no _id" and focused(browser) == "upload-files"
    # an id given twice: the service named request indices (documents.1.id) and the focus went to the index box
    choose(browser, tmp_path / "dup.jsonl")
    assert refused(browser) == "dup.jsonl, line 2: the id 'd1' is given twice (also line 1)"
    assert focused(browser) == "upload-files" and by_id(browser, "upload-files").get_attribute("aria-invalid") == "true"
    choose(browser, notes)
    set_text(browser, "upload-id", "kea")  # notes.jsonl's
    set_text(browser, "upload-text", "Kea again.")
    assert refused(browser) == "the pasted text: the id 'kea' is given twice (also notes.jsonl, line 1)"
    assert focused(browser) == "upload-id"
    choose(browser)  # a pasted text too large for any request: the text box, not the index box
    set_text(browser, "upload-id", "hugepaste")
    set_text(browser, "upload-text", "w" * MAX_BODY_BYTES)
    huge = len(json.dumps({"id": "hugepaste", "title": "", "text": "w" * MAX_BODY_BYTES}, separators=(",", ":")))
    assert refused(browser) == f"document 'hugepaste': {huge} bytes as JSON, over what one request may carry, the " \
                               f"service's max_body_bytes ({MAX_BODY_BYTES}) (field: text)"
    assert focused(browser) == "upload-text" and by_id(browser, "upload-text").get_attribute("aria-invalid") == "true"
    set_text(browser, "upload-id", "")
    choose(browser)
    set_text(browser, "upload-text", "A pasted text without an id.")
    assert refused(browser) == "the pasted text needs an id (field: id)"
    set_text(browser, "upload-text", "")
    assert refused(browser) == "choose files or paste a text to add"
    set_text(browser, "upload-index", "   ")  # not empty for the browser, empty once trimmed
    set_text(browser, "upload-id", "kea")
    set_text(browser, "upload-text", "Kea are alpine parrots.")
    assert refused(browser) == "enter an index name"

    assert by_id(browser, "upload-status").text == ""
    assert name not in [ix["name"] for ix in ui_app.api("GET", "/v1/indices").json()["indices"]]
    assert ui_app.api("GET", "/tasks").json()["counts"] == tasks_before  # nothing was queued


def test_a_json_or_jsonl_file_without_documents_is_refused_naming_it(browser, ui_app, tmp_path):
    """JSON null showed "unexpected: Cannot read properties of null (reading 'documents')"; an empty JSONL file was
    left out without a word, and chosen alone the page said that nothing was chosen."""
    name = "ui-no-docs-" + secrets.token_hex(3)
    contents = {"null.json": "null", "number.json": "3", "empty.jsonl": "", "blank.jsonl": "\n  \n\n",
                "list.json": "[]", "object.json": '{"documents": []}'}
    for file_name, content in contents.items():
        (tmp_path / file_name).write_text(content)
    notes = tmp_path / "notes.jsonl"
    notes.write_text(json.dumps({"_id": "kea", "text": "Kea are alpine parrots."}) + "\n")
    tasks_before = ui_app.api("GET", "/tasks").json()["counts"]
    open_indices(browser, ui_app)
    set_text(browser, "upload-index", name)
    for file_name in ("null.json", "number.json"):
        choose(browser, tmp_path / file_name)
        assert refused(browser) == f'{file_name}: a list of documents, or {{"documents": [...]}}'
    for file_name in ("empty.jsonl", "blank.jsonl", "list.json", "object.json"):
        choose(browser, tmp_path / file_name)
        assert refused(browser) == f"{file_name}: no documents"
    choose(browser, notes, tmp_path / "empty.jsonl")  # with a file that has documents: named, nothing sent
    assert refused(browser) == "empty.jsonl: no documents"

    assert by_id(browser, "upload-status").text == ""
    assert name not in [ix["name"] for ix in ui_app.api("GET", "/v1/indices").json()["indices"]]
    assert ui_app.api("GET", "/tasks").json()["counts"] == tasks_before  # nothing was queued


def test_a_record_with_null_title_or_text_becomes_a_document_with_empty_ones(browser, ui_app):
    open_indices(browser, ui_app)
    record = {"_id": 7, "title": None, "text": None, "year": 1999, "tags": ["a"]}
    doc = browser.execute_script("return toDocument(arguments[0], 'notes.jsonl, line 1')", record)
    assert doc == {"id": "7", "title": "", "text": "", "metadata": {"year": 1999, "tags": '["a"]'}}  # not "null";
    # the list as its JSON text, as tessera ingest writes it (it was left out without a word)


@pytest.mark.slow  # six ingestion tasks, one after another
def test_an_upload_over_the_limits_is_sent_in_parts_and_the_index_holds_every_document(browser, ui_app, tmp_path):
    most, largest = UPLOAD_LIMITS["max_documents_per_request"], UPLOAD_LIMITS["max_upload_bytes"]
    name = "ui-parts-" + secrets.token_hex(3)
    records = [{"_id": f"note-{n}", "title": f"Note {n}", "text": f"Note {n} is about the kea of valley {n}."}
               for n in range(2 * most + 2)]  # with the pasted text, 2 * most + 3 documents: three requests
    (tmp_path / "notes.jsonl").write_text("\n".join(map(json.dumps, records)) + "\n")
    files = [tmp_path / "alpine.md", tmp_path / "valleys.md"]
    files[0].write_text("# Alpine parrots\n" + text_of(largest - 3_000, "kea"))  # near the limit: a request alone
    files[1].write_text("# Valleys\n" + text_of(largest // 2, "weka"))
    for n in range(most + 1):  # with valleys.md, more files than one request may carry
        files.append(tmp_path / f"tiny-{n}.txt")
        files[-1].write_text(f"Tiny note {n} on the takahe.")
    open_indices(browser, ui_app)
    browser.execute_script("""window.statuses = [];  // every status the upload shows
        const status = document.getElementById("upload-status");
        new MutationObserver(() => window.statuses.push(status.textContent))
            .observe(status, {childList: true, characterData: true, subtree: true});""")
    set_text(browser, "upload-index", name)
    choose(browser, tmp_path / "notes.jsonl", *files)
    set_text(browser, "upload-id", "pasted")
    set_text(browser, "upload-text", "A pasted note on the kakapo.")
    by_id(browser, "upload-button").click()
    wait(browser, lambda d: by_id(d, "upload-status").text.startswith("added") or error_text(d), seconds=300)
    assert error_text(browser) == ""

    listed = ui_app.api("GET", f"/v1/indices/{name}/documents?limit=1000").json()
    expected = {r["_id"] for r in records} | {"pasted"} | {f.name for f in files}
    assert {doc["id"] for doc in listed["documents"]} == expected and listed["total"] == len(expected)
    chunks = {ix["name"]: ix for ix in ui_app.api("GET", "/v1/indices").json()["indices"]}[name]["chunks"]
    assert by_id(browser, "upload-status").text == f"added {len(expected)} document(s) to {name} as {chunks} " \
                                                   "passage(s)"
    # three batches of documents, then the files: alpine.md alone, valleys.md with `most - 1` tiny files, the rest
    parts = {text.split(":")[0] for text in browser.execute_script("return window.statuses")
             if text.startswith("part ")}
    assert parts == {f"part {n} of 6" for n in range(1, 7)}
    ui_app.api("DELETE", f"/v1/indices/{name}")


@pytest.mark.slow  # six ingestion tasks, one after another
def test_a_pdf_of_more_pages_than_a_request_may_add_is_sent_in_parts_and_every_page_with_text_is_added(
        browser, ui_app, tmp_path, pdf_writer):
    most = UPLOAD_LIMITS["max_documents_per_request"]
    name = "ui-pdf-parts-" + secrets.token_hex(3)
    # 2 * most + 3 pages, those of the second part without a text layer (figures): three parts, one of them blank
    texts = [f"Page {n} tells of the kea of valley {n}." for n in range(1, most + 1)] + [""] * most + \
        [f"Page {n} tells of the tui." for n in range(2 * most + 1, 2 * most + 4)]
    pdf = pdf_writer(tmp_path / "atlas.pdf", texts, title="Atlas")
    (tmp_path / "notes.txt").write_text("Honey bees keep hives.\n")  # in one request with the PDF: too many pages
    with_text = [f"atlas-p{n}" for n, text in enumerate(texts, start=1) if text]
    blank = f"no text layer (scans? no OCR is done), not added: pages {most + 1}-{2 * most} of atlas.pdf"
    open_indices(browser, ui_app)
    set_text(browser, "upload-index", name)
    for replace in (False, True):  # sent again with Replace ticked: a later part keeps what the earlier ones added
        if replace:
            by_id(browser, "upload-replace").click()
        choose(browser, pdf, tmp_path / "notes.txt")
        by_id(browser, "upload-button").click()
        wait(browser, lambda d: by_id(d, "upload-status").text.startswith("added") or error_text(d), seconds=300)
        assert error_text(browser) == ""
        assert by_id(browser, "upload-status").text == f"added {len(with_text) + 1} document(s) to {name} as " \
                                                       f"{len(with_text) + 1} passage(s); {blank}"
        listed = ui_app.api("GET", f"/v1/indices/{name}/documents?limit=1000").json()["documents"]
        assert sorted((doc["id"], doc["metadata"].get("page")) for doc in listed) == sorted(
            [(doc_id, int(doc_id.split("-p")[1])) for doc_id in with_text] + [("notes.txt", None)])
    ui_app.api("DELETE", f"/v1/indices/{name}")


def test_a_csv_file_of_more_rows_than_a_request_may_add_is_cut_in_parts_of_its_rows(browser, ui_app):
    """The page sent such a file once and showed the service's 422 (split it by hand): the 422 too_many_rows gives
    the file's rows, and the page sends the file again in parts, each its form field first_row, as a PDF's pages."""
    most = UPLOAD_LIMITS["max_documents_per_request"]
    open_indices(browser, ui_app)
    parts = browser.execute_script("""
        const request = filesRequest([new File(["id,text"], "big.csv")], {replace: true});
        const refusal = new ApiError("too many rows", {code: "too_many_rows", rows: arguments[0]});
        return smallerRequests(request, refusal).map(({part, body}) =>
          [part.first, part.last, body.get("first_row"), body.get("replace"), body.getAll("files").length]);""",
                                   2 * most + 1)
    assert parts == [[1, most, "1", "true", 1], [most + 1, 2 * most, str(most + 1), "true", 1],
                     [2 * most + 1, 2 * most + 1, str(2 * most + 1), "true", 1]]


@pytest.mark.slow  # four ingestion tasks, one after another
def test_a_csv_file_of_more_rows_than_a_request_may_add_is_sent_in_parts_and_every_row_is_added(
        browser, ui_app, tmp_path):
    most = UPLOAD_LIMITS["max_documents_per_request"]
    name = "ui-csv-parts-" + secrets.token_hex(3)
    rows = [(f"kea-{n}", f"Kea {n}", f"Kea {n} lives in valley {n}.") for n in range(2 * most + 1)]
    (tmp_path / "kea.csv").write_text("id,title,text\n" + "".join(",".join(row) + "\n" for row in rows))
    (tmp_path / "notes.txt").write_text("Honey bees keep hives.\n")  # in one request with the CSV: too many rows
    open_indices(browser, ui_app)
    set_text(browser, "upload-index", name)
    choose(browser, tmp_path / "kea.csv", tmp_path / "notes.txt")
    by_id(browser, "upload-button").click()
    wait(browser, lambda d: by_id(d, "upload-status").text.startswith("added") or error_text(d), seconds=300)
    assert error_text(browser) == ""
    assert by_id(browser, "upload-status").text.startswith(f"added {len(rows) + 1} document(s) to {name}")
    listed = ui_app.api("GET", f"/v1/indices/{name}/documents?limit=1000").json()["documents"]
    assert sorted(doc["id"] for doc in listed) == sorted([row[0] for row in rows] + ["notes.txt"])
    ui_app.api("DELETE", f"/v1/indices/{name}")


def test_how_a_file_was_read_is_shown_a_cp1252_jsonl_file_is_not_mangled_and_front_matter_is_metadata(
        browser, ui_app, tmp_path):
    name = "ui-read-" + secrets.token_hex(3)
    (tmp_path / "menu.txt").write_bytes("Crème brûlée, très bon, à la carte.\n".encode("cp1252"))  # a Windows editor's
    # read by the page itself, not by the service: it was stored with a replacement character for each è, û and à
    (tmp_path / "menu.jsonl").write_bytes((json.dumps({"_id": "dessert", "text": "Crème brûlée à la carte."},
                                                      ensure_ascii=False) + "\n").encode("cp1252"))
    # UTF-8 with one stray byte: read as Windows-1252 its every accented letter was mangled ("ZÃ¼rich")
    # a list and an object among its fields: left out without a word, now their JSON text as the service writes it
    (tmp_path / "places.jsonl").write_bytes(json.dumps({"_id": "zurich", "text": "Zürich, Genève, Köln@", "tags": [
        "city", "Schweiz"], "where": {"lat": 47.4, "alpine": False}, "gone": None}, ensure_ascii=False).encode()
        .replace(b"@", b"\xff") + b"\n")
    (tmp_path / "kea.md").write_text("---\ntitle: Kea\nauthor: Ann\nyear: 2024\ntags: [alpine]\ntext: clash\n---\n"
                                     "Kea are alpine parrots.\n")
    # a CSV file (refused by the page before): a document a row, as tessera ingest reads it, sent as it is
    (tmp_path / "birds.csv").write_bytes('id,title,text,year,Common name\nkaka,Kākā,"Kākā are forest parrots, louder '
                                         'than kea.",2023,bush parrot\n,,,2020,\n'.encode())
    open_indices(browser, ui_app)
    set_text(browser, "upload-index", name)
    choose(browser, tmp_path / "menu.txt", tmp_path / "kea.md", tmp_path / "menu.jsonl", tmp_path / "places.jsonl",
           tmp_path / "birds.csv")
    by_id(browser, "upload-button").click()
    wait(browser, lambda d: by_id(d, "upload-status").text.startswith("added") or error_text(d), seconds=120)
    assert error_text(browser) == ""
    assert by_id(browser, "upload-status").text == (
        f"added 5 document(s) to {name} as 5 passage(s). Warnings: menu.jsonl: not UTF-8; read as windows-1252 (if "
        "its text looks wrong, save it as UTF-8 and add it again); places.jsonl: UTF-8 text with 1 byte(s) that are "
        "not UTF-8, each read as U+FFFD (if the file has another encoding, save it as UTF-8 and add it again); "
        "menu.txt: not UTF-8; read as cp1252, the encoding guessed for it (if its text looks wrong, save it as UTF-8 "
        "and send it again); kea.md: front matter field(s) "
        "text left out: a metadata column's name is ASCII letters, digits and _ (64 at most), starting with a letter, "
        "and none of _id, "
        "chunk_id, chunk_index, doc_id, docno, id, page, path, qid, query, rank, score, text, title, total_chunks, "
        "vector, nor starting with score_ or rank_ (a search's scores and ranks); birds.csv: column(s) Common name "
        "left out: a metadata column's name is ASCII letters, digits and _ (64 at most), starting with a letter, and "
        "none of _id, chunk_id, chunk_index, doc_id, docno, id, qid, query, rank, score, text, title, total_chunks, "
        "vector, nor starting with score_ or rank_ (a search's scores and ranks); birds.csv: 1 row(s) without a text "
        "or a title left out, as "
        "tessera ingest leaves them out")
    listed = {doc["id"]: doc for doc in ui_app.api("GET", f"/v1/indices/{name}/documents").json()["documents"]}
    assert (listed["kaka"]["title"], listed["kaka"]["metadata"]) == ("Kākā", {"year": 2023})
    assert listed["kea.md"]["title"] == "Kea"
    assert listed["kea.md"]["metadata"] == {"path": "kea.md", "author": "Ann", "year": 2024, "tags": '["alpine"]'}
    menu = ui_app.api("GET", f"/v1/indices/{name}/documents/menu.txt").json()
    assert menu["passages"][0]["text"] == "Crème brûlée, très bon, à la carte."
    assert listed["zurich"]["metadata"] == {"tags": json.dumps(["city", "Schweiz"], ensure_ascii=False),
                                            "where": json.dumps({"lat": 47.4, "alpine": False})}
    dessert = ui_app.api("GET", f"/v1/indices/{name}/documents/dessert").json()
    assert dessert["passages"][0]["text"] == "Crème brûlée à la carte."
    zurich = ui_app.api("GET", f"/v1/indices/{name}/documents/zurich").json()
    assert zurich["passages"][0]["text"] == "Zürich, Genève, Köln\ufffd"
    ui_app.api("DELETE", f"/v1/indices/{name}")


@pytest.mark.slow  # an ingestion of some 1,400 passages, cancelled once seen moving
def test_an_upload_counts_its_passages_and_after_a_reload_the_indices_tab_still_follows_it(browser, ui_app):
    """A large text that is one document: its progress moves by passages (its documents said "0 of 1" for minutes),
    on the Add form, and after a reload, when only the service knew of it, on a line of its own under the table,
    followed to its end."""
    name = "ui-big-" + secrets.token_hex(3)
    open_indices(browser, ui_app)
    set_text(browser, "upload-index", name)
    set_text(browser, "upload-id", "book")
    set_text(browser, "upload-text", text_of(MAX_BODY_BYTES * 9 // 10, "kakapo"))  # ~1,400 passages: a while
    by_id(browser, "upload-button").click()
    status = wait(browser, lambda d: (lambda text: text if " passage(s) embedded (" in text else None)(
        by_id(d, "upload-status").text), seconds=180)
    assert status.startswith("task ") and status.endswith(" of 1 document(s))"), status
    task_id = status.split(":")[0].removeprefix("task ")

    browser.refresh()  # the upload goes on in the service; the page knows of it no more
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="indices"]').click()
    line = f'#index-ingestions li[data-task="{task_id}"]'
    said = re.compile(rf"^{name}: task {task_id}: ingest, (\d+) of (\d+) passage\(s\) embedded \((\d+ of )?1 "
                      r"document\(s\)\)$")
    first = wait(browser, lambda d: said.match(d.find_element(By.CSS_SELECTOR, line).text)
                 if d.find_elements(By.CSS_SELECTOR, line) else None)
    done, total = int(first[1]), int(first[2])
    assert 0 < done < total, first[0]
    wait(browser, lambda d: (lambda m: m and int(m[1]) > done)(said.match(d.find_element(By.CSS_SELECTOR, line).text)))
    assert by_id(browser, "upload-status").text == ""  # the line under the table, not the form's status

    ui_app.api("GET", f"/task/cancel/{task_id}")  # ended here: the page follows it to its end
    wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, line).text == f"{name}: task {task_id}: cancelled")
    assert error_text(browser) == ""
