"""The web UI as a new user meets it: what the page says when it is refused or gets no answer, the keyboard, and
tables read whole in a wide window and a narrow one. Same service and browser as the other test_web_ui_*.py modules
(package fixtures)."""

from __future__ import annotations

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from tests.ui.browser import (
    QUERY, added_index, by_id, chat_with, click, code_parts, error_text, fill_search, open_page, page_reason, page_text,
    set_text, shown_results, wait,
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
    broken = {m["id"]: page_reason(m["reason"]) for m in listed if m["type"] == "flow" and m["status"] != "ready"}
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
    wait(browser, lambda d: by_id(d, "health").text == "ready", seconds=30)  # polled every 3 s; slower under load
    assert error_text(browser) == ""
    by_id(browser, "search-button").click()
    wait(browser, lambda d: len(shown_results(d)) == 1)


def test_the_search_tab_offers_a_flow_the_service_cannot_run_switched_off_with_its_reason(browser, ui_app):
    open_page(browser, ui_app)
    status = ui_app.api("GET", "/flows").json()["status"]
    off = {name: page_reason(flow["reason"]) for name, flow in status.items() if not flow["runnable"]}
    assert "rag_gold" in off and "bm25" not in off  # rag_gold needs a benchmark's dataset
    options = {o.get_attribute("value"): o for o in Select(by_id(browser, "flow")).options}
    assert set(options) == set(status)
    for name, flow in status.items():
        assert options[name].is_enabled() == flow["runnable"], name
        assert options[name].get_attribute("title") == page_reason(flow["reason"] or ""), name
    assert Select(by_id(browser, "flow")).first_selected_option.is_enabled()
    notes = by_id(browser, "flows-off")  # the reasons in the page too, for a keyboard or a phone
    notes.find_element(By.TAG_NAME, "summary").click()
    assert {li.get_attribute("data-flow"): li.text for li in notes.find_elements(By.TAG_NAME, "li")} == {
        name: f"{name}: {reason}" for name, reason in off.items()}
    commands = code_parts(status["rag_gold"]["reason"])
    assert "tessera bench" in commands  # its `tessera bench` as <code>, as the error line shows it, not backticks
    assert [c.text for c in notes.find_elements(By.CSS_SELECTOR, 'li[data-flow="rag_gold"] code')] == commands

    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="flows"]').click()  # Search with it: refused, saying why
    click(browser, '//ul[@id="flow-list"]//button[text()="rag_gold"]')
    wait(browser, lambda d: by_id(d, "flow-name").get_attribute("value") == "rag_gold")
    by_id(browser, "flow-use").click()
    # the error line shows the reason's `tessera bench` as <code>, without its backticks
    said = page_text(f"'rag_gold' cannot run on this service: {off['rag_gold']}")
    assert wait(browser, lambda d: error_text(d)) == said
    assert [c.text for c in by_id(browser, "error").find_elements(By.TAG_NAME, "code")] == commands
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
