"""The Indices tab: documents from files (JSONL, Markdown, PDF) and pasted text make an index the Search tab then
reads; shared, a document replaced, listed, deleted and the index deleted, each as the API does it."""

from __future__ import annotations

import json
import secrets

import pytest
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions

from tests.ui.browser import (added_index, by_id, cell_texts, click, dialog, error_text, fill_search, open_page,
                              option_values, press, set_text, shown_results, wait)

pytestmark = [pytest.mark.ray, pytest.mark.integration]


def index_rows(driver) -> dict[str, list[str]]:
    """The indices table: each row's cells by the name in its first cell."""
    return {cells[0]: cells[1:] for cells in cell_texts(driver, "#index-table tbody tr")}


def document_rows(driver) -> list[list[str]]:
    """The listed documents of an index: each row's cells but the last (its button)."""
    return [cells[:-1] for cells in cell_texts(driver, "#doc-table tbody tr")]


def test_documents_from_files_and_pasted_text_make_an_index_the_search_tab_then_reads(browser, ui_app, tmp_path,
                                                                                      pdf_writer):
    open_page(browser, ui_app)
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="indices"]').click()
    listing = ui_app.api("GET", "/v1/indices").json()
    default = next(ix for ix in listing["indices"] if ix["default"])
    label = f"{default['name']} (default)" if default["name"] else "(the default index)"  # outside $TESSERA_HOME
    wait(browser, lambda d: index_rows(d).get(label, [None])[0] == str(default["chunks"]))
    assert option_values(browser, "upload-spec") == [
        s["name"] for s in listing["specs"]]
    # The default index's name (its folder's: the table names it by none) typed for Delete documents: the button is
    # off, saying why (the listing's read_only), not asking to confirm and then showing the service's certain 403.
    field = by_id(browser, "delete-docs-index")
    folder = next(name for name, why in listing["read_only"].items() if why.startswith("is the service's default"))
    field.send_keys(folder)
    wait(browser, lambda d: not by_id(d, "delete-docs-button").is_enabled())
    why = listing["read_only"][folder]
    assert "(build it with `tessera ingest`)" in why  # said with its command as <code>, not between backticks
    assert by_id(browser, "delete-docs-why").text == f"index '{folder}' {why.replace('`', '')}"
    assert [c.text for c in by_id(browser, "delete-docs-why").find_elements(By.TAG_NAME, "code")] == ["tessera ingest"]
    field.send_keys(Keys.CONTROL, "a")
    field.send_keys(Keys.BACKSPACE)  # no name: on again, for the deletions below
    wait(browser, lambda d: by_id(d, "delete-docs-button").is_enabled() and not by_id(d, "delete-docs-why").text)

    name = "ui-notes-" + secrets.token_hex(3)
    notes = tmp_path / "notes.jsonl"
    notes.write_text("\n".join(json.dumps(d) for d in [
        {"_id": "bees", "title": "Bees", "text": "Honey bees keep hives and dance to show where flowers are.",
         "shelf": "insects"},
        {"_id": "moss", "title": "Moss", "text": "Mosses grow in damp shade and have no flowers or seeds."}]))
    (tmp_path / "ferns.md").write_text("Ferns unroll their fronds from fiddleheads and spread by spores.")
    pdf_writer(tmp_path / "trees.pdf", ["Oaks drop acorns in autumn.", "Pines keep their needles through winter."],
               title="Trees")
    set_text(browser, "upload-index", "not a name")  # refused in the page, saying what a name holds; nothing lost
    by_id(browser, "upload-files").send_keys("\n".join(str(tmp_path / f) for f in ("notes.jsonl", "ferns.md",
                                                                                    "trees.pdf")))
    set_text(browser, "upload-id", "lichen")
    set_text(browser, "upload-text", "Lichens are partnerships of a fungus and an alga that live on bare rock.")
    by_id(browser, "upload-button").click()
    wait(browser, lambda d: error_text(d).startswith("'not a name' is not a valid index name (field: index): letters, "
                                                     'digits, "_", "." and "-"'))
    set_text(browser, "upload-index", folder)  # the default index: refused in the page, as Delete documents is
    by_id(browser, "upload-button").click()
    wait(browser, lambda d: error_text(d) == f"index '{folder}' {why.replace('`', '')}")
    assert [c.text for c in by_id(browser, "error").find_elements(By.TAG_NAME, "code")] == ["tessera ingest"]
    assert by_id(browser, "upload-id").get_attribute("value") == "lichen"
    assert by_id(browser, "upload-status").text == ""

    set_text(browser, "upload-index", name)
    by_id(browser, "upload-button").click()
    wait(browser, lambda d: by_id(d, "upload-status").text.startswith("added"), seconds=180)
    assert error_text(browser) == ""
    # Two requests: the JSONL documents and the pasted text as JSON, the PDF (a document a page) and the
    # Markdown file as files.
    assert by_id(browser, "upload-status").text == f"added 6 document(s) to {name} as 6 passage(s)"
    made = {ix["name"]: ix for ix in ui_app.api("GET", "/v1/indices").json()["indices"]}[name]
    assert made["chunks"] == 6 and made["writable"] and made["spec"] == "ingest"
    ingestion = ui_app.api("GET", f"/task/progress/{made['ingest_task']}").json()["progress"]["log"]
    assert "the encoder runs on Serve deployment 'ui/all-MiniLM-L6-v2'" in ingestion  # the app's MiniLM
    assert wait(browser, lambda d: index_rows(d).get(name))[:5] == ["6", "all-MiniLM-L6-v2", "yes", "yes", "no"]
    suggested = [o.get_attribute("value") for o in browser.find_elements(By.CSS_SELECTOR, "#all-indices option")]
    assert name in suggested  # the index fields of Search and Chat offer it
    buttons = f'//tr[@data-index="{name}"]//button'
    assert [b.text for b in browser.find_elements(By.XPATH, buttons)] == ["search", "documents", "share", "delete"]
    click(browser, f'{buttons}[text()="share"]')  # private until shared with every key
    wait(browser, lambda d: (index_rows(d).get(name) or [None] * 5)[4] == "yes")
    assert {ix["name"]: ix for ix in ui_app.api("GET", "/v1/indices").json()["indices"]}[name]["shared"]
    assert [b.text for b in browser.find_elements(By.XPATH, buttons)] == ["search", "documents", "make private",
                                                                          "delete"]
    assert [b.text for b in browser.find_elements(By.XPATH, '//tr[@data-index=""]//button')] == ["search"]

    browser.find_element(By.XPATH, f'{buttons}[text()="search"]').click()
    wait(browser, lambda d: by_id(d, "tab-search").is_displayed())
    assert by_id(browser, "index").get_attribute("value") == name
    fill_search(browser, "bm25", "which plants have no flowers", "3")
    by_id(browser, "search-button").click()
    wait(browser, lambda d: len(shown_results(d)) == 1)
    expected = ui_app.api("POST", "/v1/search", {"flow": "bm25", "query": "which plants have no flowers",
                                                 "top_k": 3, "index": name}).json()["results"][0]["hits"]
    assert shown_results(browser)[0][1] == [h["docno"] for h in expected] and expected[0]["docno"] == "moss#0"
    assert {h["doc_id"]: h.get("shelf") for h in expected}["bees"] == "insects"  # a JSONL field became a column
    pines = ui_app.api("POST", "/v1/search", {"flow": "bm25", "query": "needles in winter", "top_k": 1,
                                              "index": name}).json()["results"][0]["hits"][0]
    assert (pines["docno"], pines["path"], pines["page"], pines["title"]) == ("trees-p2#0", "trees.pdf", 2, "Trees")

    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="indices"]').click()
    set_text(browser, "upload-index", name)  # the pasted document again, changed: refused, then replaced
    set_text(browser, "upload-id", "lichen")
    set_text(browser, "upload-text", "Lichens also grow on tree bark and old walls.")
    by_id(browser, "upload-button").click()
    wait(browser, lambda d: error_text(d).startswith("HTTP 409"))
    refused = ui_app.api("POST", f"/v1/indices/{name}/documents", {"documents": [{"id": "lichen", "text": "x"}]})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "documents_exist"
    assert "replace: true" in refused.json()["error"]["message"]  # the API's words, for a JSON client
    assert error_text(browser) == ("HTTP 409 (field: documents): documents with these ids are in the index already: "
                                   "'lichen'. Tick \"Replace documents\" and press Add again to replace them, or give "
                                   "them other ids.")
    assert by_id(browser, "upload-replace").find_element(By.XPATH, "..").text.startswith("Replace documents")
    # the focus on the box the message asks to tick (it went to the index box)
    assert wait(browser, lambda d: d.switch_to.active_element.get_attribute("id") == "upload-replace")
    assert by_id(browser, "upload-replace").get_attribute("aria-invalid") == "true"
    by_id(browser, "upload-replace").click()
    by_id(browser, "upload-button").click()
    wait(browser, lambda d: by_id(d, "upload-status").text == f"added 1 document(s) to {name} as 1 passage(s)",
         seconds=180)
    lichen = ui_app.api("POST", "/v1/search", {"flow": "bm25", "query": "lichens", "top_k": 5, "index": name}).json()
    assert [h["text"] for h in lichen["results"][0]["hits"] if h["doc_id"] == "lichen"] == [
        "Lichens also grow on tree bark and old walls."]
    set_text(browser, "delete-docs-index", name)
    set_text(browser, "delete-docs-ids", "moss, nothing")
    by_id(browser, "delete-docs-button").click()
    assert dialog(browser).text == f"Delete 2 document(s) from the index '{name}'?"
    dialog(browser).accept()
    wait(browser, lambda d: by_id(d, "delete-docs-status").text.startswith("deleted"))
    # the index named, as an upload's outcome does: the box may name another by the time it is read
    assert by_id(browser, "delete-docs-status").text == f"deleted 1 document(s) (1 passage(s)) from {name}; not in " \
                                                       "the index: nothing"
    assert wait(browser, lambda d: (index_rows(d).get(name) or [None])[0] == "5")

    browser.find_element(By.XPATH, f'{buttons}[text()="documents"]').click()  # listed as the API lists them
    listed = ui_app.api("GET", f"/v1/indices/{name}/documents").json()
    expected = [[d["id"], d["title"], ", ".join(f"{k}: {v}" for k, v in d["metadata"].items()), str(d["passages"])]
                for d in listed["documents"]]
    wait(browser, lambda d: document_rows(d) == expected)
    assert listed["total"] == 5 and ["trees-p2", "Trees", "path: trees.pdf, page: 2", "1"] in expected
    assert by_id(browser, "doc-heading").text == f"Documents of {name}: 5 of 5"
    browser.find_element(By.XPATH, '//tr[@data-doc="ferns.md"]//button[text()="delete"]').click()
    dialog(browser).accept()
    wait(browser, lambda d: [row[0] for row in document_rows(d)] == [r[0] for r in expected if r[0] != "ferns.md"])
    assert "ferns.md" not in [d["id"] for d in ui_app.api("GET", f"/v1/indices/{name}/documents").json()["documents"]]
    assert wait(browser, lambda d: (index_rows(d).get(name) or [None])[0] == "4")
    set_text(browser, "delete-docs-ids", "lichen")  # the form below deletes too: the open panel follows
    by_id(browser, "delete-docs-button").click()
    dialog(browser).accept()
    wait(browser, lambda d: by_id(d, "doc-heading").text == f"Documents of {name}: 3 of 3")
    assert [row[0] for row in document_rows(browser)] == [r[0] for r in expected if r[0] not in ("ferns.md", "lichen")]
    browser.find_element(By.XPATH, f'{buttons}[text()="delete"]').click()
    dialog(browser).accept()
    wait(browser, lambda d: name not in index_rows(d))
    assert name not in {ix["name"] for ix in ui_app.api("GET", "/v1/indices").json()["indices"]}


def test_delete_documents_from_an_index_that_is_not_there_is_refused_before_asking_and_one_made_since_is_found(
        browser, ui_app):
    """No index of that name: refused in the page, naming the field, where it asked to confirm and then showed the
    service's 404; an index made after the table was read (elsewhere) is read again, not refused."""
    open_page(browser, ui_app)
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="indices"]').click()
    wait(browser, lambda d: index_rows(d))
    assert ui_app.api("POST", "/v1/indices/no_such_index/delete", {"ids": ["a"]}).status_code == 404
    set_text(browser, "delete-docs-index", "no_such_index")
    set_text(browser, "delete-docs-ids", "a")
    by_id(browser, "delete-docs-button").click()
    with pytest.raises(NoAlertPresentException):  # before, it asked to confirm, then showed the service's 404
        browser.switch_to.alert.text
    shown = wait(browser, lambda d: error_text(d))
    assert shown == "there is no index 'no_such_index' (field: index): the table above lists the indices"
    assert browser.switch_to.active_element == by_id(browser, "delete-docs-index")

    name = "ui-made-since-" + secrets.token_hex(3)
    added_index(ui_app, name)  # not in the table the page read
    try:
        assert name not in index_rows(browser)
        set_text(browser, "delete-docs-index", name)
        set_text(browser, "delete-docs-ids", "note")
        by_id(browser, "delete-docs-button").click()
        asked = wait(browser, expected_conditions.alert_is_present(), 30)  # once the indices are read again
        assert asked.text == f"Delete 1 document(s) from the index '{name}'?"
        asked.accept()
        wait(browser, lambda d: by_id(d, "delete-docs-status").text.startswith("deleted"))
        assert by_id(browser, "delete-docs-status").text == f"deleted 1 document(s) (1 passage(s)) from {name}"
    finally:
        ui_app.api("DELETE", f"/v1/indices/{name}")


def test_share_and_delete_by_keyboard_leave_the_focus_on_the_rows_buttons(browser, ui_app):
    first, second = (f"ui-keys-{n}-" + secrets.token_hex(3) for n in (1, 2))
    added_index(ui_app, first)
    added_index(ui_app, second)
    queued = ui_app.api("POST", f"/v1/indices/{first}/documents", {"documents": [{"id": "more", "text": "Wasps."}]})
    wait(None, lambda _: ui_app.api("GET", f"/task/progress/{queued.json()['task_id']}").json()["has_finished"], 120)
    focused = lambda d: d.switch_to.active_element.get_attribute("aria-label")  # noqa: E731
    try:
        open_page(browser, ui_app)
        browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="indices"]').click()
        wait(browser, lambda d: first in index_rows(d) and second in index_rows(d))
        press(browser, f'//*[@id="index-table"]//button[@aria-label="share {first}"]', Keys.ENTER)
        wait(browser, lambda d: index_rows(d)[first][4] == "yes")
        assert wait(browser, focused, 10) == f"make private {first}"  # not "search", which a second Enter ran

        click(browser, f'//button[@aria-label="documents of {first}"]')
        wait(browser, lambda d: len(document_rows(d)) == 2)
        press(browser, f'//button[@aria-label="delete note from {first}"]', Keys.ENTER)
        dialog(browser).accept()
        wait(browser, lambda d: len(document_rows(d)) == 1)
        assert wait(browser, focused, 10) == f"delete more from {first}"  # the next row's, not the page's body

        press(browser, f'//button[@aria-label="delete {first}"]', Keys.ENTER)
        dialog(browser).accept()
        wait(browser, lambda d: first not in index_rows(d))
        assert wait(browser, focused, 10).startswith("delete ")  # the next (or previous) row's delete
    finally:
        for name in (first, second):
            ui_app.api("DELETE", f"/v1/indices/{name}")


#: Per row at ``arguments[0]`` (a CSS selector): its name cell's and each button's left and right edges, the window's
#: width, and the page's and the table's box's scroll widths against their widths.
ROW_EDGES = """const row = document.querySelector(arguments[0]);
    const edges = (node) => [Math.floor(node.getBoundingClientRect().left),
                             Math.ceil(node.getBoundingClientRect().right)];
    const box = row.closest('.scroll');
    return {name: edges(row.cells[0]),
            buttons: [...row.querySelectorAll('button')].map((b) => [b.textContent, ...edges(b)]),
            width: window.innerWidth, page: [document.documentElement.scrollWidth, window.innerWidth],
            box: [box.scrollWidth, box.clientWidth]};"""


def in_view(edges: dict) -> bool:
    """Whether a row's name and every one of its buttons lie whole within the window, with nothing to scroll to."""
    inside = lambda left, right: 0 <= left and right <= edges["width"]  # noqa: E731
    return (inside(*edges["name"]) and all(inside(left, right) for _, left, right in edges["buttons"])
            and edges["page"][0] <= edges["page"][1] and edges["box"][0] <= edges["box"][1])


def test_at_400_px_an_index_and_a_listed_documents_name_and_buttons_are_in_view_without_scrolling_sideways(
        browser, ui_app):
    name = "narrow_index_" + "notes" * 7  # a long name, as a user's can be: 48 letters
    added_index(ui_app, name)
    try:
        open_page(browser, ui_app)
        browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                {"width": 400, "height": 900, "deviceScaleFactor": 1, "mobile": False})
        try:
            browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="indices"]').click()
            index_row = f'#index-table tr[data-index="{name}"]'
            wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, index_row))
            edges = browser.execute_script(ROW_EDGES, index_row)
            assert [text for text, _, _ in edges["buttons"]] == ["search", "documents", "share", "delete"]
            assert in_view(edges), edges  # as table columns the buttons were off to the side, scrolled to
            click(browser, f'//tr[@data-index="{name}"]//button[text()="documents"]')
            doc_row = '#doc-table tr[data-doc="note"]'
            wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, doc_row))
            edges = browser.execute_script(ROW_EDGES, doc_row)
            assert [text for text, _, _ in edges["buttons"]] == ["note", "delete"]
            assert in_view(edges), edges
        finally:
            browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        for table in ("index-table", "doc-table"):  # a wide window: a table again, a row on one line
            row = browser.find_element(By.CSS_SELECTOR, f"#{table} tbody tr")
            assert len({round(td.rect["y"]) for td in row.find_elements(By.TAG_NAME, "td")}) == 1, table
    finally:
        ui_app.api("DELETE", f"/v1/indices/{name}")
