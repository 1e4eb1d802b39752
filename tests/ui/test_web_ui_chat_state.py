"""The Chat tab's state across a new conversation and a reload: *New chat* clears the last conversation's error and
the field it marked (they stayed on screen until some other action)."""

from __future__ import annotations

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
