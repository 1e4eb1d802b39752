"""The page by keyboard and for a screen reader. A search sent from its button leaves the keyboard on the results'
line (the button was off while it ran, which dropped the focus to the page's body, and the next Tab started from the
top) and its outcome is said once, by a status region (the status line itself counts seconds while
it runs); a field an error names is marked invalid and described by the error until the next action."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.ui.browser import QUERY, by_id, error_text, fill_search, open_page, set_text, wait

pytestmark = [pytest.mark.ray, pytest.mark.integration]


def focused(driver) -> str:
    return driver.switch_to.active_element.get_attribute("id")


def test_a_search_by_keyboard_leaves_the_focus_on_its_outcome_and_says_it_once(browser, ui_app):
    open_page(browser, ui_app)
    fill_search(browser, "bm25", QUERY, "3")
    by_id(browser, "search-button").send_keys(Keys.ENTER)  # Tab to it, Enter
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#results article.result") and focused(d))
    assert focused(browser) == "search-status"
    by_id(browser, "queries").send_keys(Keys.CONTROL, Keys.ENTER)  # from the box, the keyboard stays in it
    wait(browser, lambda d: by_id(d, "search-button").is_enabled() and d.find_elements(By.CSS_SELECTOR, "#results h2"))
    assert focused(browser) == "queries"
    said = wait(browser, lambda d: by_id(d, "announcer").get_attribute("textContent"))
    assert said == by_id(browser, "search-status").text and said.startswith("bm25: 1 query in ")
    assert by_id(browser, "announcer").get_attribute("role") == "status"
    assert by_id(browser, "search-status").get_attribute("aria-live") is None  # "running bm25… 3 s" is not said


def test_the_field_an_error_names_is_marked_invalid_until_the_next_action(browser, ui_app):
    open_page(browser, ui_app)
    fill_search(browser, "bm25", QUERY, "3")
    set_text(browser, "index", "my notes")
    by_id(browser, "search-button").click()
    wait(browser, lambda d: error_text(d))
    field = by_id(browser, "index")
    assert focused(browser) == "index"
    assert (field.get_attribute("aria-invalid"), field.get_attribute("aria-describedby")) == ("true", "error")
    set_text(browser, "index", "")
    by_id(browser, "search-button").click()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#results article.result"))
    assert field.get_attribute("aria-invalid") is None and field.get_attribute("aria-describedby") is None
