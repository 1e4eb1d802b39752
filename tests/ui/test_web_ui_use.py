"""The web UI as a new user meets it: what the page says when it is refused or gets no answer, the keyboard, and
tables read whole in a wide window and a narrow one. Same service and browser as test_web_ui.py (package fixtures)."""

from __future__ import annotations

import json
import secrets

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from tests.ui.test_web_ui import (
    QUERY, by_id, chat_with, click, error_text, fill_search, open_page, set_text, shown_results, wait,
)

pytestmark = [pytest.mark.ray, pytest.mark.integration]

#: How many lines an element's text takes on screen (one rectangle per line fragment of its text).
LINES = """const range = document.createRange(); range.selectNodeContents(arguments[0]);
return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;"""


#: The index table's button labels and lines, and the lines of the named index's name cell; null until its row is drawn.
TABLE_LINES = """const row = document.querySelector(`#index-table tr[data-index="${arguments[0]}"]`);
if (!row) return null;
const lines = (element) => {""" + LINES.replace("arguments[0]", "element") + """};
const buttons = [...document.querySelectorAll("#index-table tbody td button")];
return {buttons: buttons.map((b) => b.textContent), button_lines: buttons.map(lines),
        name_lines: lines(row.querySelector("td"))};"""


def lines(driver, element) -> int:
    return driver.execute_script(LINES, element)


def test_without_the_key_the_refusal_says_where_in_the_page_the_key_goes(browser, ui_app):
    browser.get(ui_app.url + "/ui/")
    browser.execute_script("window.localStorage.clear()")
    browser.refresh()
    message = wait(browser, lambda d: error_text(d))
    assert message.startswith("HTTP 401") and message.endswith("Type the service's API key in the API key field at "
                                                               "the top")
    open_page(browser, ui_app)
    assert error_text(browser) == ""


def test_ctrl_enter_in_the_queries_searches_and_a_submit_the_browser_refuses_clears_the_last_error(browser, ui_app):
    open_page(browser, ui_app)
    fill_search(browser, "bm25", QUERY, "5")
    by_id(browser, "index").send_keys("no_such_index")
    by_id(browser, "queries").send_keys(Keys.CONTROL, Keys.ENTER)  # Enter alone is a new line: one query a line
    assert wait(browser, lambda d: error_text(d)).startswith("HTTP 422 (field: index)")
    by_id(browser, "index").clear()
    top_k = by_id(browser, "top-k")
    top_k.clear()
    top_k.send_keys("0")  # under the field's min: the browser refuses the submit, nothing is sent
    by_id(browser, "search-button").click()
    assert browser.execute_script("return document.getElementById('top-k').validity.valid") is False
    assert error_text(browser) == ""  # the index error is not this submit's
    top_k.clear()
    top_k.send_keys("3", Keys.ENTER)  # Enter in a one-line field submits as ever
    wait(browser, lambda d: len(shown_results(d)) == 1)
    expected = [h["docno"] for h in ui_app.api("POST", "/v1/search", {"flow": "bm25", "query": QUERY, "top_k": 3})
                .json()["results"][0]["hits"]]
    assert shown_results(browser) == [(QUERY, expected)] and error_text(browser) == ""


def test_queries_of_only_spaces_are_refused_by_the_page_not_sent(browser, ui_app):
    open_page(browser, ui_app)
    fill_search(browser, "bm25", "   ", "5")
    by_id(browser, "queries").send_keys(Keys.ENTER, "  ")
    by_id(browser, "search-button").click()
    assert browser.execute_script("return document.getElementById('queries').validity.valid") is False
    assert "at least one query" in browser.execute_script("return document.getElementById('queries').validationMessage")
    assert error_text(browser) == "" and shown_results(browser) == []  # nothing went to the service
    by_id(browser, "queries").send_keys(QUERY)  # a query among the blank lines: searched
    by_id(browser, "search-button").click()
    wait(browser, lambda d: len(shown_results(d)) == 1)


def test_docnos_stay_whole_and_a_long_passage_is_read_whole_after_more(browser, ui_app):
    open_page(browser, ui_app)
    fill_search(browser, "bm25", QUERY, "5")
    by_id(browser, "search-button").click()
    wait(browser, lambda d: len(shown_results(d)) == 1)
    hits = ui_app.api("POST", "/v1/search", {"flow": "bm25", "query": QUERY, "top_k": 5}).json()["results"][0]["hits"]
    table = browser.find_element(By.CSS_SELECTOR, "#results table.hits")
    heads = [th.text for th in table.find_elements(By.TAG_NAME, "th")]
    rows = [r.find_elements(By.TAG_NAME, "td") for r in table.find_elements(By.CSS_SELECTOR, "tbody tr")]
    for cells in rows:  # a docno cut in two reads as two ids
        assert lines(browser, cells[heads.index("docno")]) == 1, cells[heads.index("docno")].text
        assert lines(browser, cells[heads.index("score")]) == 1
    long = next(n for n, hit in enumerate(hits) if len(hit["text"]) > 280)
    cell = rows[long][heads.index("text")]
    assert cell.text == hits[long]["text"][:280] + "… more"
    cell.find_element(By.CSS_SELECTOR, "button.more").click()
    assert cell.text == hits[long]["text"] + " less"
    cell.find_element(By.CSS_SELECTOR, "button.more").click()
    assert cell.text == hits[long]["text"][:280] + "… more"


def added_index(service, name: str) -> None:
    """An index of this key with one document, made through the API (its ingestion task followed to the end)."""
    document = {"id": "note", "title": "Note", "text": "Honey bees keep hives."}
    queued = service.api("POST", f"/v1/indices/{name}/documents", {"documents": [document]}).json()
    wait(None, lambda _: service.api("GET", f"/task/progress/{queued['task_id']}").json()["has_finished"], 120)


def test_at_400_px_a_tables_buttons_and_names_are_not_cut_to_a_letter_a_line(browser, ui_app):
    added_index(ui_app, "narrow_window_notes")
    open_page(browser, ui_app)
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": 400, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    try:
        browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="indices"]').click()
        # measured in one script, once the new index's row is there: the table is drawn again as its list arrives
        table = wait(browser, lambda d: d.execute_script(TABLE_LINES, "narrow_window_notes"))
        assert set(table["buttons"]) >= {"search", "documents", "share", "delete"}
        assert table["button_lines"] == [1] * len(table["buttons"])
        assert table["name_lines"] == 1  # one word: one line, the table scrolling in its box if need be
        assert not browser.execute_script("return document.documentElement.scrollWidth > window.innerWidth")
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_the_chat_starts_on_rag_and_offers_a_flow_the_service_cannot_run_switched_off_with_its_reason(browser, ui_app):
    open_page(browser, ui_app)
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="chat"]').click()
    options = wait(browser, lambda d: Select(by_id(d, "chat-model")).options)
    listed = ui_app.api("GET", "/v1/models").json()["data"]
    broken = {m["id"]: m["reason"] for m in listed if m["type"] == "flow" and m["status"] != "ready"}
    assert broken  # rag_gold needs a benchmark's dataset
    shown = {o.get_attribute("value"): o for o in options}
    for name, reason in broken.items():
        assert not shown[name].is_enabled() and shown[name].get_attribute("title") == reason
    chosen = Select(by_id(browser, "chat-model")).first_selected_option
    assert chosen.is_enabled() and chosen.get_attribute("value") not in broken
    assert chosen.get_attribute("value") == "rag"  # a first question is answered from the documents


def test_no_answer_turns_the_badge_and_when_the_service_answers_again_the_error_goes(browser, ui_app):
    open_page(browser, ui_app)
    wait(browser, lambda d: by_id(d, "health").text == "ready")
    fill_search(browser, "bm25", QUERY, "5")
    offline = {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}
    browser.execute_cdp_cmd("Network.enable", {})
    try:
        browser.execute_cdp_cmd("Network.emulateNetworkConditions", offline)
        by_id(browser, "search-button").click()
        assert wait(browser, lambda d: error_text(d)).startswith("the service did not answer: is it running?")
        assert by_id(browser, "health").text == "not reachable"  # not the "ready" of the page's first minute
    finally:
        browser.execute_cdp_cmd("Network.emulateNetworkConditions", {**offline, "offline": False})
        browser.execute_cdp_cmd("Network.disable", {})
    wait(browser, lambda d: by_id(d, "health").text == "ready", seconds=15)
    assert error_text(browser) == ""
    by_id(browser, "search-button").click()
    wait(browser, lambda d: len(shown_results(d)) == 1)


def test_the_search_tab_offers_a_flow_the_service_cannot_run_switched_off_with_its_reason(browser, ui_app):
    open_page(browser, ui_app)
    status = ui_app.api("GET", "/flows").json()["status"]
    off = {name: flow["reason"] for name, flow in status.items() if not flow["runnable"]}
    assert "rag_gold" in off and "bm25" not in off  # rag_gold needs a benchmark's dataset
    options = {o.get_attribute("value"): o for o in Select(by_id(browser, "flow")).options}
    assert set(options) == set(status)
    for name, flow in status.items():
        assert options[name].is_enabled() == flow["runnable"], name
        assert options[name].get_attribute("title") == (flow["reason"] or ""), name
    assert Select(by_id(browser, "flow")).first_selected_option.is_enabled()
    notes = by_id(browser, "flows-off")  # the reasons in the page too, for a keyboard or a phone
    notes.find_element(By.TAG_NAME, "summary").click()
    assert {li.get_attribute("data-flow"): li.text for li in notes.find_elements(By.TAG_NAME, "li")} == {
        name: f"{name}: {reason}" for name, reason in off.items()}

    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="flows"]').click()  # Search with it: refused, saying why
    click(browser, '//ul[@id="flow-list"]//button[text()="rag_gold"]')
    wait(browser, lambda d: by_id(d, "flow-name").get_attribute("value") == "rag_gold")
    by_id(browser, "flow-use").click()
    assert wait(browser, lambda d: error_text(d)) == f"'rag_gold' cannot run on this service: {off['rag_gold']}"
    assert by_id(browser, "tab-flows").is_displayed()


def test_a_refused_streamed_chat_says_where_in_the_page_the_key_goes(browser, ui_app):
    open_page(browser, ui_app)
    chat_with(browser, "rag")
    try:
        set_text(browser, "api-key", "not-the-key")  # typed, not yet applied (no change event): the chat sends it
        by_id(browser, "chat-input").send_keys(QUERY)
        by_id(browser, "chat-send").click()
        message = wait(browser, lambda d: error_text(d))
        refused = requests.post(ui_app.url + "/v1/chat/completions", headers={"Authorization": "Bearer not-the-key"},
                                json={"model": "rag", "stream": True, "messages": [{"role": "user", "content": QUERY}]},
                                timeout=30)
        error = refused.json()["error"]
        field = f" (field: {error['param']})" if error["param"] else ""
        assert refused.status_code == 401
        assert message == f"HTTP 401{field}: {error['message']}. Type the service's API key in the API key field at " \
                          "the top"
        assert by_id(browser, "chat-input").get_attribute("value") == QUERY  # to send again with the right key
    finally:
        open_page(browser, ui_app)


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


def test_an_ended_task_is_deleted_from_the_page_and_an_indexs_last_ingestion_is_refused_saying_why(browser, ui_app):
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
    row = wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f'#task-table tr[data-task="{task_id}"]'))
    link = row.find_element(By.CSS_SELECTOR, "button.link")  # the id cut to 8: a narrow window keeps the status
    assert link.text == task_id[:8] and link.get_attribute("title") == task_id

    row.find_element(By.XPATH, './/button[text()="delete"]').click()
    browser.switch_to.alert.accept()
    wait(browser, lambda d: not d.find_elements(By.CSS_SELECTOR, f'#task-table tr[data-task="{task_id}"]'))
    assert by_id(browser, "task-detail").text == "" and not by_id(browser, "task-chat-form").is_displayed()
    assert ui_app.api("GET", f"/task/progress/{task_id}").status_code == 404 and error_text(browser) == ""

    click(browser, f'//tr[@data-task="{ingestion["id"]}"]//button[text()="delete"]')
    browser.switch_to.alert.accept()
    refused = ui_app.api("DELETE", f"/task/{ingestion['id']}")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "task_of_index"
    assert wait(browser, lambda d: error_text(d)) == f"HTTP 409 (field: id): {refused.json()['error']['message']}"
    assert browser.find_elements(By.CSS_SELECTOR, f'#task-table tr[data-task="{ingestion["id"]}"]')


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
    spec = ui_app.api("GET", "/flows/rag").json()
    spec["steps"]["answer"]["params"] = {"model": "local", "max_tokens": 8}  # a long answer, cut after 8 tokens
    name = "ui_chat_cut_" + secrets.token_hex(3)
    assert ui_app.api("PUT", f"/flows/{name}", spec).status_code == 201
    try:
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
    finally:
        ui_app.api("DELETE", f"/flows/{name}")


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
