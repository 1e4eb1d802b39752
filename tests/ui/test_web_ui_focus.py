"""The page by keyboard and for a screen reader. The button pressed is switched off while its request runs, and the
focus left with it for the page's body: a keyboard user started again from the top of the page. After a refusal the
focus is on the field the error names (marked invalid and described by the error until the next action), else on the
box the user typed in; after a search sent from its button, on the results' line, and its start and its outcome are
each said once, by a status region (the status line itself counts seconds while it runs)."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.ui.browser import QUERY, by_id, chat_with, error_text, fill_search, open_page, set_text, wait

pytestmark = [pytest.mark.ray, pytest.mark.integration]


def focused(driver) -> str:
    return driver.switch_to.active_element.get_attribute("id")


def test_after_a_refused_search_or_chat_the_focus_is_on_the_field_it_names_else_on_the_box_typed_in(browser, ui_app):
    open_page(browser, ui_app)
    fill_search(browser, "bm25", QUERY, "5")
    set_text(browser, "index", "no_such_index")
    by_id(browser, "search-button").click()
    assert wait(browser, lambda d: error_text(d)).startswith("HTTP 422 (field: index): ")
    assert wait(browser, lambda d: focused(d) == "index")
    field = by_id(browser, "index")
    assert (field.get_attribute("aria-invalid"), field.get_attribute("aria-describedby")) == ("true", "error")
    set_text(browser, "index", "")
    try:
        set_text(browser, "api-key", "not-the-key")  # typed, not yet applied: the search sends it, a 401 names no field
        by_id(browser, "search-button").click()
        assert wait(browser, lambda d: error_text(d)).startswith("HTTP 401")
        assert wait(browser, lambda d: focused(d) == "queries")
        assert field.get_attribute("aria-invalid") is None and field.get_attribute("aria-describedby") is None
    finally:
        open_page(browser, ui_app)

    chat_with(browser, "rag")
    set_text(browser, "chat-index", "no_such_index")
    by_id(browser, "chat-input").send_keys(QUERY)
    by_id(browser, "chat-send").click()
    assert wait(browser, lambda d: error_text(d)).startswith("HTTP 422 (field: index): ")
    assert wait(browser, lambda d: focused(d) == "chat-index")
    assert by_id(browser, "chat-input").get_attribute("value") == QUERY  # the message back in its box
    set_text(browser, "chat-index", "")


#: What the status region says from now on, each text as it is set (``window.said``).
LISTEN = """window.said = [];
const region = document.getElementById('announcer');
new MutationObserver(() => { if (region.textContent) window.said.push(region.textContent); })
    .observe(region, {childList: true, characterData: true, subtree: true});"""


def test_a_search_by_keyboard_leaves_the_focus_on_its_outcome_and_says_its_start_and_outcome_once(browser, ui_app):
    """That a search began was only shown, "running bm25… 3 s", which is no live region: a screen reader heard
    nothing from Enter until the outcome (a chat's answer: a minute). It is said once, without the seconds."""
    open_page(browser, ui_app)
    fill_search(browser, "bm25", QUERY, "3")
    by_id(browser, "search-button").send_keys(Keys.ENTER)  # Tab to it, Enter
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#results article.result") and focused(d))
    assert focused(browser) == "search-status"
    wait(browser, lambda d: by_id(d, "announcer").get_attribute("textContent") == by_id(d, "search-status").text)
    browser.execute_script(LISTEN)
    by_id(browser, "queries").send_keys(Keys.CONTROL, Keys.ENTER)  # from the box, the keyboard stays in it
    wait(browser, lambda d: by_id(d, "search-button").is_enabled() and d.find_elements(By.CSS_SELECTOR, "#results h2"))
    assert focused(browser) == "queries"
    said = wait(browser, lambda d: d.execute_script(  # until the outcome is said
        "return window.said.some((text) => text.startsWith('bm25: ')) ? window.said : null"))
    assert said == ["running bm25…", by_id(browser, "search-status").text]
    assert said[1].startswith("bm25: 1 query in ")
    assert by_id(browser, "announcer").get_attribute("role") == "status"
    assert by_id(browser, "search-status").get_attribute("aria-live") is None  # "running bm25… 3 s" is not said
