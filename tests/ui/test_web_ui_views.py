"""The web UI's views read whole: every field of a hit, tasks deleted and shown as cards in a narrow window, a
document's passages, the flow editor, pasted documents, the task chat, and names a screen reader gets. Same service
and browser as the other test_web_ui_*.py modules (package fixtures)."""

from __future__ import annotations

import json

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.ui.browser import (
    QUERY, added_index, by_id, chat_with, click, conversation_above_the_box, dialog, error_text, fill_search, heard,
    open_page, rag_cut_short, set_text, shown_results, wait,
)

pytestmark = [pytest.mark.ray, pytest.mark.integration]


def shown_field(text: str, value) -> bool:
    """Whether the page's text of a field is ``value`` as the API sent it (a number as JavaScript writes it)."""
    if isinstance(value, bool):
        return text == str(value).lower()
    if isinstance(value, (int, float)):
        return float(text) == value
    return text == (value if isinstance(value, str) else json.dumps(value, separators=(",", ":")))


def test_a_hits_docno_opens_every_field_the_flow_wrote_for_it_and_at_400_px_a_hit_is_a_card(browser, ui_app):
    open_page(browser, ui_app)
    fill_search(browser, "demo", QUERY, "3")  # demo adds language, text_clean and word counts: no column shows them
    by_id(browser, "search-button").click()
    wait(browser, lambda d: len(shown_results(d)) == 1)
    hit = ui_app.api("POST", "/v1/search", {"flow": "demo", "query": QUERY, "top_k": 3}).json()["results"][0]["hits"][0]
    opener = browser.find_element(By.CSS_SELECTOR, '#results td[data-column="docno"] button')
    assert opener.text == hit["docno"] and opener.get_attribute("aria-expanded") == "false"
    opener.click()
    opened = browser.find_element(By.CSS_SELECTOR, "#results tr.fields")
    names = [dt.text for dt in opened.find_elements(By.TAG_NAME, "dt")]
    values = [dd.text for dd in opened.find_elements(By.TAG_NAME, "dd")]
    columns = {"qid", "query", "rank", "docno", "title", "score", "text"}
    expected = {name: value for name, value in hit.items() if name not in columns and value is not None}
    assert {"language", "text_clean", "words", "score_bm25"} <= set(expected)
    assert names == list(expected)
    assert all(shown_field(text, expected[name]) for name, text in zip(names, values)), list(zip(names, values))
    opener.click()
    assert browser.find_elements(By.CSS_SELECTOR, "#results tr.fields") == []
    assert opener.get_attribute("aria-expanded") == "false"

    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": 400, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    try:  # as table columns a hit's text got a word a line; as a card it takes the row's width
        widths = browser.execute_script("""return [...document.querySelectorAll('#results table.hits tbody tr')]
            .map((row) => [row.getBoundingClientRect().width,
                           row.querySelector('td[data-column="text"]').getBoundingClientRect().width]);""")
        assert len(widths) == 3 and all(text >= row - 1 and row > 300 for row, text in widths), widths
        assert not browser.execute_script("return document.documentElement.scrollWidth > window.innerWidth")
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_an_ended_task_is_deleted_from_the_page_and_an_indexs_last_ingestion_offers_no_delete(browser, ui_app):
    added_index(ui_app, "task_delete_notes")
    ingestion = next(t for t in ui_app.api("GET", "/tasks").json()["tasks"] if t["flow"] == "ingest:task_delete_notes")
    open_page(browser, ui_app)
    fill_search(browser, "bm25", QUERY, "2")
    by_id(browser, "enqueue-button").click()
    heading = wait(browser, lambda d: next((h.text for h in d.find_elements(By.CSS_SELECTOR, "#task-detail h2")
                                            if h.text.endswith(": finished")), None), seconds=300)
    task_id = heading.removeprefix("task ").removesuffix(": finished")
    body = ui_app.api("GET", f"/task/progress/{task_id}").json()
    outcome = by_id(browser, "task-detail").find_element(By.CSS_SELECTOR, "p.outcome").text
    assert outcome == body["result"]["result_description"]["text"]  # what it did, in a line
    # The list reloads while the task runs: each element is read or clicked as found again, never kept.
    link = wait(browser, lambda d: (lambda b: (b.text, b.get_attribute("title")))(
        d.find_element(By.CSS_SELECTOR, f'#task-table tr[data-task="{task_id}"] button.link')))
    assert link == (task_id[:8], task_id)  # the id cut to 8: a narrow window keeps the status

    click(browser, f'//tr[@data-task="{task_id}"]//button[text()="delete"]')
    dialog(browser).accept()
    wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, f'#task-table tr[data-task="{task_id}"]'))
    assert by_id(browser, "task-detail").text == "" and not by_id(browser, "task-chat-form").is_displayed()
    assert ui_app.api("GET", f"/task/progress/{task_id}").status_code == 404 and error_text(browser) == ""

    # the index's latest ingestion, which the service keeps with the index: its delete is off, saying why (a
    # confirm dialog came before a certain 409)
    refused = ui_app.api("DELETE", f"/task/{ingestion['id']}")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "task_of_index"
    off = browser.find_element(By.XPATH, f'//tr[@data-task="{ingestion["id"]}"]//button[text()="delete"]')
    assert not off.is_enabled() and off.get_attribute("title") == (
        "the latest ingestion of the index 'task_delete_notes', kept with it: delete the index on the Indices tab to "
        "remove it")
    assert error_text(browser) == ""


def test_a_pasted_document_added_takes_its_id_and_title_with_it_so_the_next_one_is_not_refused(browser, ui_app):
    open_page(browser, ui_app)
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="indices"]').click()
    set_text(browser, "upload-index", "pasted_notes")
    for n, text in enumerate(("Wasps build paper nests.", "Ants farm aphids."), start=1):
        by_id(browser, "upload-id").send_keys(f"note-{n}")
        by_id(browser, "upload-title").send_keys(f"Note {n}")
        by_id(browser, "upload-text").send_keys(text)
        by_id(browser, "upload-button").click()
        wait(browser, lambda d: by_id(d, "upload-status").text.startswith("added") or error_text(d), seconds=120)
        assert error_text(browser) == "" and by_id(browser, "upload-status").text == \
            "added 1 document(s) to pasted_notes as 1 passage(s)"
        assert [by_id(browser, f).get_attribute("value") for f in ("upload-id", "upload-title", "upload-text")] == \
            ["", "", ""]
    listed = ui_app.api("GET", "/v1/indices/pasted_notes/documents").json()["documents"]
    assert [(d["id"], d["title"]) for d in listed] == [("note-1", "Note 1"), ("note-2", "Note 2")]
    assert {".html", ".htm"} <= set(by_id(browser, "upload-files").get_attribute("accept").split(","))


def test_the_flow_editors_buttons_sit_under_its_spec_and_a_flow_chosen_brings_the_editor_into_view(browser, ui_app):
    open_page(browser, ui_app)
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="flows"]').click()
    click(browser, '//ul[@id="flow-list"]//button[text()="bm25"]')
    wait(browser, lambda d: by_id(d, "flow-name").get_attribute("value") == "bm25")
    gap = browser.execute_script("""return document.getElementById('flow-save').getBoundingClientRect().top
        - document.getElementById('flow-spec').getBoundingClientRect().bottom;""")
    assert 0 < gap < 40, gap  # the form's lines were spread over the whole list's height
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": 400, "height": 700, "deviceScaleFactor": 1, "mobile": False})
    try:  # the list above the editor: the last flow's spec opens out of sight unless the page goes to it
        last = browser.find_elements(By.CSS_SELECTOR, "#flow-list button")[-1]
        name = last.text
        last.click()
        wait(browser, lambda d: by_id(d, "flow-name").get_attribute("value") == name)
        top = browser.execute_script("return document.getElementById('flow-form').getBoundingClientRect().top")
        assert 0 <= top < 700, top
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


@pytest.mark.slow  # the embedded model answers in the replica
def test_a_chat_answer_cut_at_max_tokens_says_so_under_the_turn(browser, ui_app):
    with rag_cut_short(ui_app, "ui_chat_cut_") as name:
        open_page(browser, ui_app)
        chat_with(browser, name)
        by_id(browser, "chat-input").send_keys(QUERY, Keys.CONTROL, Keys.ENTER)
        note = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#chat-log .turn-note"), seconds=300)[0]
        expected = ui_app.api("POST", "/v1/chat/completions",
                              {"model": name, "messages": [{"role": "user", "content": QUERY}]}).json()["choices"][0]
        assert expected["finish_reason"] == "length"
        assert note.text == "(cut off at max_tokens: the answer may end mid-sentence)"
        turns = browser.find_elements(By.CSS_SELECTOR, "#chat-log .turn")
        assert [t.get_attribute("class") for t in turns] == ["turn user", "turn assistant"]
        assert turns[1].text == expected["message"]["content"].strip()  # the note is not part of the reply


def test_a_listed_documents_id_opens_its_passages_text_under_it_and_a_second_click_closes_it(browser, ui_app):
    from urllib.parse import quote

    name, odd = "opened_notes", "field notes/kakapo?#1.md"  # an id whose '/', '?' and '#' are sent encoded
    text = " ".join(f"Line {n}: the kakapo of island {n} feeds on rimu fruit at night." for n in range(60))
    queued = ui_app.api("POST", f"/v1/indices/{name}/documents", {"documents": [
        {"id": odd, "title": "Kakapo", "text": text}, {"id": "weta", "text": "Weta are heavy insects."}]}).json()
    wait(None, lambda _: ui_app.api("GET", f"/task/progress/{queued['task_id']}").json()["has_finished"], 120)
    expected = ui_app.api("GET", f"/v1/indices/{name}/documents/{quote(odd, safe='')}")
    assert expected.status_code == 200, expected.text  # through Serve's proxy: the encoded '/' reaches the route
    passages = [(p["docno"], p["text"]) for p in expected.json()["passages"]]
    assert len(passages) >= 3
    open_page(browser, ui_app)
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="indices"]').click()
    click(browser, f'//tr[@data-index="{name}"]//button[text()="documents"]')
    opener = wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f'#doc-table tr[data-doc="{odd}"] button.link'))
    assert opener.text == odd and opener.get_attribute("aria-expanded") == "false"
    opener.click()
    opened = wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#doc-table tr.passages"))
    assert browser.execute_script("return arguments[0].previousElementSibling.dataset.doc", opened) == odd
    shown = [(li.get_attribute("data-docno"), li.find_element(By.TAG_NAME, "p").text)
             for li in opened.find_elements(By.TAG_NAME, "li")]
    assert shown == passages and opener.get_attribute("aria-expanded") == "true"
    opener.click()
    wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, "#doc-table tr.passages"))
    assert opener.get_attribute("aria-expanded") == "false" and error_text(browser) == ""

    assert ui_app.api("POST", f"/v1/indices/{name}/delete", {"ids": ["weta"]}).json()["deleted"] == ["weta"]
    gone = browser.find_element(By.CSS_SELECTOR, '#doc-table tr[data-doc="weta"] button.link')  # listed before
    gone.click()
    message = ui_app.api("GET", f"/v1/indices/{name}/documents/weta").json()["error"]["message"]
    assert wait(browser, lambda d: error_text(d)) == f"HTTP 404 (field: id): {message}"
    assert gone.get_attribute("aria-expanded") == "false" and not browser.find_elements(By.CSS_SELECTOR, "tr.passages")


def test_an_index_rows_buttons_name_their_index_for_a_screen_reader(browser, ui_app):
    added_index(ui_app, "labelled_notes")
    open_page(browser, ui_app)
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="indices"]').click()
    wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, '#index-table tr[data-index="labelled_notes"]'))

    assert wait(browser, lambda d: heard(d, '#index-table tr[data-index="labelled_notes"] button')) == [
        ("search", "search labelled_notes"), ("documents", "documents of labelled_notes"),
        ("share", "share labelled_notes"), ("delete", "delete labelled_notes")]  # "search" alone said not which
    assert wait(browser, lambda d: heard(d, '#index-table tr[data-index=""] button')) == [
        ("search", "search the default index")]
    names = [name for _, name in wait(browser, lambda d: heard(d, "#index-table tbody button"))]
    assert len(names) == len(set(names)), names  # no two buttons of the table sound the same
    click(browser, '//tr[@data-index="labelled_notes"]//button[text()="documents"]')
    assert wait(browser, lambda d: heard(d, '#doc-table tr[data-doc="note"] td:last-child button')) == [
        ("delete", "delete note from labelled_notes")]


def test_at_400_px_the_tasks_are_cards_read_without_scrolling_sideways(browser, ui_app):
    added_index(ui_app, "narrow_task_notes")  # an ingestion task, ended: its row has a delete button
    ingestion = next(t for t in ui_app.api("GET", "/tasks").json()["tasks"] if t["flow"] == "ingest:narrow_task_notes")
    open_page(browser, ui_app)
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": 400, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    try:
        browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="tasks"]').click()
        row = wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f'#task-table tr[data-task="{ingestion["id"]}"]'))
        box = browser.execute_script("""const box = document.getElementById('task-table').parentElement;
            return [box.scrollWidth, box.clientWidth];""")
        assert box[0] <= box[1], box  # the table's own box: nothing to scroll to (it held "created" and the button)
        cells = {td.get_attribute("data-column"): td for td in row.find_elements(By.TAG_NAME, "td")}
        assert list(cells) == ["task", "flow", "status", "steps done", "created", "actions"]
        assert cells["flow"].text == "ingest:narrow_task_notes" and cells["status"].text == "finished"
        for column, cell in cells.items():  # every cell in the window, whole
            assert cell.is_displayed() and 0 <= cell.rect["x"] and cell.rect["x"] + cell.rect["width"] <= 400, column
        actions = f'#task-table tr[data-task="{ingestion["id"]}"] td[data-column="actions"] button'
        assert wait(browser, lambda d: heard(d, actions)) == [("delete", f"delete task {ingestion['id']}")]
        assert not browser.execute_script("return document.documentElement.scrollWidth > window.innerWidth")
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    cells = row.find_elements(By.TAG_NAME, "td")  # a wide window: a table again, a row on one line
    assert len({round(td.rect["y"]) for td in cells}) == 1


def test_a_tasks_chat_shows_its_conversation_above_the_box_as_the_chat_tab_does(browser, ui_app):
    open_page(browser, ui_app)
    chat_with(browser, "rag")
    assert conversation_above_the_box(browser, "chat-log", "chat-input")
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="search"]').click()
    fill_search(browser, "bm25", QUERY, "2")
    by_id(browser, "enqueue-button").click()
    wait(browser, lambda d: by_id(d, "task-chat-form").is_displayed(), seconds=300)
    assert conversation_above_the_box(browser, "task-chat-log", "task-chat-input")


#: Text of the page's own that names a route of the API ("POST /task/enqueue"): a user reads it, not a client.
ROUTE_WORDS = r"\b(GET|POST|PUT|PATCH|DELETE) /|(?<![\w.])/(v1/|tasks?\b|flows\b|healthz)"  # not docs/flows.md


def test_the_pages_own_titles_and_labels_name_no_api_route(browser, ui_app):
    import re

    added_index(ui_app, "worded_notes")  # a row of the caller's in the index table and an ended task in the tasks'
    open_page(browser, ui_app)
    wait(browser, lambda d: by_id(d, "health").text == "ready")
    loaded = {"search": "#flow option", "tasks": "#task-table tbody tr", "flows": "#flow-list button",
              "indices": '#index-table tr[data-index="worded_notes"]', "chat": "#chat-model option"}
    for tab, content in loaded.items():
        browser.find_element(By.CSS_SELECTOR, f'nav button[data-tab="{tab}"]').click()
        wait(browser, lambda d, css=content: d.find_elements(By.CSS_SELECTOR, css))
        # the page's own words: buttons, the badge, labels and hints (a flow's or model's reason is the service's)
        worded = browser.execute_script("""return [...document.querySelectorAll(
            'button, #health, label, .hint, th, [aria-label]')].flatMap((e) => [e.title, e.getAttribute('aria-label'),
            e.matches('button, label, .hint, th') ? e.textContent : null]).filter(Boolean);""")
        assert worded and not [w for w in worded if re.search(ROUTE_WORDS, w)], tab


def test_a_search_index_that_is_no_name_is_refused_in_the_pages_words_and_a_listed_or_path_index_searched(
        browser, ui_app, ui_home, sample_index):
    import shutil

    open_page(browser, ui_app)
    fill_search(browser, "bm25", QUERY, "3")
    set_text(browser, "index", "my notes")
    for button in ("search-button", "enqueue-button"):  # searched, or run as a task: the same body, the same words
        browser.execute_script("document.getElementById('error').hidden = true")
        by_id(browser, button).click()
        assert wait(browser, lambda d: error_text(d)).startswith(
            "'my notes' is not a valid index name (field: index): letters, digits, \"_\", \".\" and \"-\"")
    assert by_id(browser, "tab-search").is_displayed()  # no task was followed
    refused = ui_app.api("POST", "/v1/search", {"flow": "bm25", "query": QUERY, "index": "my notes"})
    assert refused.status_code == 422 and refused.json()["error"]["param"] == "index"  # the service refuses it too

    expected = [h["docno"] for h in ui_app.api("POST", "/v1/search", {"flow": "bm25", "query": QUERY, "top_k": 3})
                .json()["results"][0]["hits"]]
    set_text(browser, "index", str(sample_index))  # a path the service reads indices from: sent as it is
    by_id(browser, "search-button").click()
    wait(browser, lambda d: shown_results(d) == [(QUERY, expected)] and error_text(d) == "")

    copy = ui_home / "indices" / "sample copy"  # an index named with a space by hand (`tessera ingest` to a folder)
    shutil.copytree(sample_index, copy)
    try:
        open_page(browser, ui_app)  # its list read again: the copy is listed, so the page takes its name
        fill_search(browser, "bm25", QUERY, "3")
        set_text(browser, "index", "sample copy")
        by_id(browser, "search-button").click()
        wait(browser, lambda d: shown_results(d) == [(QUERY, expected)] and error_text(d) == "")
    finally:
        shutil.rmtree(copy)


def test_a_chat_index_that_is_no_name_is_refused_in_the_pages_words_as_the_search_tabs(browser, ui_app):
    open_page(browser, ui_app)
    chat_with(browser, "rag")
    set_text(browser, "chat-index", "my notes")
    by_id(browser, "chat-input").send_keys("how do bees make honey")
    by_id(browser, "chat-send").click()
    assert wait(browser, lambda d: error_text(d)).startswith(
        "'my notes' is not a valid index name (field: index): letters, digits, \"_\", \".\" and \"-\"")
    assert by_id(browser, "chat-input").get_attribute("value") == "how do bees make honey"  # back in the box
    refused = ui_app.api("POST", "/v1/chat/completions", {"model": "rag", "index": "my notes",
                                                          "messages": [{"role": "user", "content": "bees"}]})
    assert refused.status_code == 422 and refused.json()["error"]["param"] == "index"  # the service refuses it too
