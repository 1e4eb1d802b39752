"""The web UI and the browser's history: each tab opened, and each task opened from the Tasks list, is an entry that
Back and Forward move between. Same service and browser as the other test_web_ui_*.py modules (package fixtures)."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from selenium.webdriver.common.by import By

from tests.ui.browser import added_index, by_id, click, open_page, wait

pytestmark = [pytest.mark.ray, pytest.mark.integration]


def shown_tab(driver) -> str | None:
    """The tab selected, once its panel is the one shown (None while they disagree)."""
    selected = driver.find_element(By.CSS_SELECTOR, 'nav [aria-selected="true"]').get_attribute("data-tab")
    panels = [s.get_attribute("id") for s in driver.find_elements(By.CSS_SELECTOR, "main > section")
              if s.is_displayed()]
    return selected if panels == [f"tab-{selected}"] else None


def at(driver, tab: str, fragment: str) -> bool:
    return shown_tab(driver) == tab and urlsplit(driver.current_url).fragment == fragment


def test_back_and_forward_move_between_the_tabs_and_between_a_task_and_the_task_list(browser, ui_app):
    added_index(ui_app, "history_notes")
    ingestion = next(t for t in ui_app.api("GET", "/tasks").json()["tasks"] if t["flow"] == "ingest:history_notes")
    open_page(browser, ui_app)
    for tab in ("flows", "models"):
        browser.find_element(By.CSS_SELECTOR, f'nav button[data-tab="{tab}"]').click()
    assert at(browser, "models", "models")
    browser.back()  # the tab before, not the page before the app
    wait(browser, lambda d: at(d, "flows", "flows"))
    browser.back()  # the page as it was loaded: its first tab
    wait(browser, lambda d: at(d, "search", ""))
    browser.forward()
    wait(browser, lambda d: at(d, "flows", "flows"))

    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="tasks"]').click()
    wait(browser, lambda d: at(d, "tasks", "tasks"))
    click(browser, f'//tr[@data-task="{ingestion["id"]}"]//button[@title="{ingestion["id"]}"]')
    wait(browser, lambda d: at(d, "tasks", f"tasks/{ingestion['id']}")
         and by_id(d, "task-detail").text.startswith(f"task {ingestion['id']}: finished"))
    browser.back()  # back to the list: the task's view gone
    wait(browser, lambda d: at(d, "tasks", "tasks") and by_id(d, "task-detail").text == "")
    browser.forward()  # the task again
    wait(browser, lambda d: at(d, "tasks", f"tasks/{ingestion['id']}")
         and by_id(d, "task-detail").text.startswith(f"task {ingestion['id']}: finished"))
    browser.back()
    browser.back()  # the tab before the Tasks tab
    wait(browser, lambda d: at(d, "flows", "flows") and by_id(d, "task-detail").text == "")
    browser.refresh()  # a reload opens the URL's tab
    wait(browser, lambda d: at(d, "flows", "flows"))
