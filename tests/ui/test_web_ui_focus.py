"""The focus after a refusal: on the field the error names, else on the box the user typed in. The button pressed is
switched off while its request runs, and the focus left with it for the page's body: a keyboard user started again
from the top of the page to reach the field to correct."""

from __future__ import annotations

import pytest

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
    set_text(browser, "index", "")
    try:
        set_text(browser, "api-key", "not-the-key")  # typed, not yet applied: the search sends it, a 401 names no field
        by_id(browser, "search-button").click()
        assert wait(browser, lambda d: error_text(d)).startswith("HTTP 401")
        assert wait(browser, lambda d: focused(d) == "queries")
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
