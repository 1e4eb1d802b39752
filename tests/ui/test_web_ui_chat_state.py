"""The Chat tab's state across a new conversation and a reload: *New chat* clears the last conversation's error and
the field it marked (they stayed on screen until some other action); a reload while an answer is written puts the
message it answers back in the box (it was lost: the conversation came back up to the turn before it); a flow's
answer that cites no source says so in the Search tab's words (it said nothing)."""

from __future__ import annotations

import secrets

import pytest
from selenium.webdriver.common.by import By

from tests.ui.browser import QUERY, by_id, chat_with, error_text, open_page, set_text, wait

pytestmark = [pytest.mark.ray, pytest.mark.integration]


def test_new_chat_clears_the_last_conversations_error_and_the_field_it_marked(browser, ui_app):
    open_page(browser, ui_app)
    chat_with(browser, "rag")
    set_text(browser, "chat-index", "no-such-index")
    by_id(browser, "chat-input").send_keys(QUERY)
    by_id(browser, "chat-send").click()
    wait(browser, lambda d: error_text(d).startswith("HTTP 422 (field: index): "))
    assert by_id(browser, "chat-index").get_attribute("aria-invalid") == "true"

    by_id(browser, "chat-clear").click()
    assert error_text(browser) == ""
    assert browser.find_elements(By.CSS_SELECTOR, '[aria-invalid="true"], [aria-describedby="error"]') == []
    assert browser.find_elements(By.CSS_SELECTOR, "#chat-log > *") == []


@pytest.mark.slow  # the embedded model answers in the replica
def test_a_reload_while_an_answer_is_written_puts_its_message_back_in_the_box(browser, ui_app):
    open_page(browser, ui_app)
    chat_with(browser, "rag")
    by_id(browser, "chat-input").send_keys("who won the 2018 football world cup")  # declined: kept, no model call
    by_id(browser, "chat-send").click()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#chat-log .abstained"), seconds=300)
    shown = [(t.get_attribute("class"), t.text) for t in browser.find_elements(By.CSS_SELECTOR, "#chat-log > *")]
    by_id(browser, "chat-input").send_keys(QUERY)
    by_id(browser, "chat-send").click()
    assert by_id(browser, "chat-stop").is_displayed()  # being answered (the model writes for seconds)
    browser.refresh()
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="chat"]').click()
    assert wait(browser, lambda d: by_id(d, "chat-input").get_attribute("value") == QUERY)
    assert by_id(browser, "chat-status").text == ("the page was reloaded before this message was answered: it is "
                                                  "back in the box, to send again")
    assert [(t.get_attribute("class"), t.text) for t in browser.find_elements(By.CSS_SELECTOR, "#chat-log > *")] \
        == shown  # the conversation up to the turn before it
    by_id(browser, "chat-clear").click()  # New chat: nothing is put back after the next reload
    browser.refresh()
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="chat"]').click()
    wait(browser, lambda d: by_id(d, "chat-model").get_attribute("value"))
    assert by_id(browser, "chat-status").text == ""


@pytest.mark.slow  # the embedded model answers in the replica
def test_a_flows_answer_that_cites_no_source_says_so_as_the_search_tab_does(browser, ui_app):
    spec = ui_app.api("GET", "/flows/rag").json()
    spec["steps"]["answer"]["params"]["max_tokens"] = 1  # one token: no room for a citation "[1]"
    name = "uncited_" + secrets.token_hex(3)
    assert ui_app.api("PUT", f"/flows/{name}", spec).status_code == 201
    try:
        question = [{"role": "user", "content": QUERY}]
        message = ui_app.api("POST", "/v1/chat/completions", {"model": name, "messages": question}).json()[
            "choices"][0]["message"]
        assert message["sources"] == [] and message["content"].strip() and "answered" not in message
        open_page(browser, ui_app)
        chat_with(browser, name)
        by_id(browser, "chat-input").send_keys(QUERY)
        by_id(browser, "chat-send").click()
        note = wait(browser, lambda d: next((t.text for t in d.find_elements(By.CSS_SELECTOR, "#chat-log .uncited")),
                                            None), seconds=300)
        assert note == "no sources cited"  # the Search tab's words (serve/ui/views.js answerView)
        browser.refresh()  # kept with the conversation
        browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="chat"]').click()
        assert wait(browser, lambda d: [t.text for t in d.find_elements(By.CSS_SELECTOR, "#chat-log .uncited")]
                    == ["no sources cited"])
    finally:
        ui_app.api("DELETE", f"/flows/{name}")


@pytest.mark.slow  # the embedded model answers in the replica
def test_an_answer_written_from_no_documents_is_not_said_to_cite_none(browser, ui_app):
    """``answer_only`` gives its answer step no documents (the no-retrieval baseline): "no sources cited" under its
    reply was noise, as the Search tab already knew (``answeredWithoutDocuments``). The reply says how many documents
    the flow found (``documents: 0``), and the Chat tab reads it."""
    question = [{"role": "user", "content": QUERY}]
    message = ui_app.api("POST", "/v1/chat/completions", {"model": "answer_only", "messages": question}).json()[
        "choices"][0]["message"]
    assert message["sources"] == [] and message["documents"] == 0 and message["content"].strip()
    open_page(browser, ui_app)
    chat_with(browser, "answer_only")
    by_id(browser, "chat-input").send_keys(QUERY)
    by_id(browser, "chat-send").click()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#chat-log .turn.assistant:not(.pending)")
         and not by_id(d, "chat-stop").is_displayed(), seconds=300)
    notes = [note.text for note in browser.find_elements(By.CSS_SELECTOR, "#chat-log .turn-note")]
    assert "no sources cited" not in notes, notes
