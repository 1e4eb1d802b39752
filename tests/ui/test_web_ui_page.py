"""The page itself in a real browser against a real service: without the key it loads and names the refusal, the
key is kept across reloads and another key clears all the page showed; the tabs are a tab list the URL names, the
console stays clean, and no tab is wider than a 400 px window."""

from __future__ import annotations

import http.client
from urllib.parse import urlsplit

import pytest
import requests
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.ui.browser import (
    QUERY, by_id, click, error_text, fill_search, flow_names, follow_enqueued, open_page, shown_results, wait,
)

pytestmark = [pytest.mark.ray, pytest.mark.integration]


def raw_get(url: str) -> int:
    """GET with the path sent exactly as written (requests would resolve its dot segments first); the status."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        connection.request("GET", parts.path)
        return connection.getresponse().status
    finally:
        connection.close()


def test_without_the_key_the_page_loads_and_names_the_refusal_then_the_key_is_kept(browser, ui_app):
    browser.get(ui_app.url + "/")
    browser.execute_script("window.localStorage.clear()")
    open_page(browser, ui_app, typed=False)
    assert wait(browser, lambda d: "API key" in error_text(d))
    assert error_text(browser).startswith("HTTP 401")
    assert requests.get(ui_app.url + "/flows", timeout=30).status_code == 401  # the page is open, the API is not
    page = requests.get(ui_app.url + "/ui/", timeout=30)
    assert page.status_code == 200 and "default-src 'self'" in page.headers["Content-Security-Policy"]
    for sneaky in ("/ui/../tasks", "/ui/%2e%2e/tasks", "/ui/../../etc/passwd"):  # the open prefix opens no route
        assert raw_get(ui_app.url + sneaky) in (401, 404), sneaky
    assert wait(browser, lambda d: by_id(d, "health").text == "ready")
    assert flow_names(browser) == []

    open_page(browser, ui_app)
    assert error_text(browser) == ""
    listed = ui_app.api("GET", "/flows").json()
    assert flow_names(browser) == listed["builtin"] + listed["saved"]
    browser.refresh()  # the key survives a reload (local storage), so the flows load again
    wait(browser, lambda d: "bm25" in flow_names(d))
    assert by_id(browser, "api-key").get_attribute("value") == ui_app.key


def test_another_key_clears_everything_the_page_showed_for_the_previous_one(browser, ui_app):
    open_page(browser, ui_app)
    fill_search(browser, "bm25", QUERY, "3")
    by_id(browser, "search-button").click()
    wait(browser, lambda d: len(shown_results(d)) == 1)
    follow_enqueued(browser)
    wait(browser, lambda d: by_id(d, "task-chat-form").is_displayed())
    assert browser.find_elements(By.CSS_SELECTOR, "#task-table tbody tr")
    try:
        field = by_id(browser, "api-key")
        field.clear()
        field.send_keys("not-the-key", Keys.TAB)
        wait(browser, lambda d: error_text(d).startswith("HTTP 401"))  # the open tab read again, with this key
        assert browser.find_elements(By.CSS_SELECTOR, "#task-detail *") == []
        assert browser.find_elements(By.CSS_SELECTOR, "#task-table tbody tr") == []
        assert by_id(browser, "task-counts").text == "" and not by_id(browser, "task-chat-form").is_displayed()
        browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="search"]').click()
        assert shown_results(browser) == [] and by_id(browser, "search-status").text == ""
        assert flow_names(browser) == [] and by_id(browser, "flow-description").text == ""
        assert by_id(browser, "queries").get_attribute("value") == QUERY  # what was typed is no data of a key
    finally:
        open_page(browser, ui_app)  # the right key again, for the tests after this one


def test_a_key_with_a_character_no_key_has_is_named_and_the_service_still_reads_as_up(browser, ui_app):
    """A pasted zero-width space made fetch throw before sending (no such header), which the page took for a
    service that does not answer: "not reachable", "is it running?", no flows; the health check sent the key too."""
    open_page(browser, ui_app)
    try:
        field = by_id(browser, "api-key")
        field.clear()
        field.send_keys(ui_app.key + "\u200b", Keys.TAB)
        assert wait(browser, lambda d: "no key has" in error_text(d))
        assert error_text(browser).startswith(
            f"the API key holds a character no key has (character {len(ui_app.key) + 1}, U+200B): type it again")
        assert "did not answer" not in error_text(browser) and flow_names(browser) == []
        browser.execute_script("checkHealth()")  # the health check needs no key: it sends none
        assert wait(browser, lambda d: by_id(d, "health").text == "ready")
    finally:
        open_page(browser, ui_app)


def overflows(driver) -> bool:
    return driver.execute_script("return document.documentElement.scrollWidth > window.innerWidth")


def test_at_400_px_wide_no_tab_is_wider_than_the_window_and_a_long_query_is_cut_in_its_heading(browser, ui_app):
    open_page(browser, ui_app)
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": 400, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    try:
        assert browser.execute_script("return window.innerWidth") == 400
        query = "honey bees " * 30 + "pollination" * 20  # long, with a word longer than the window
        fill_search(browser, "bm25", query.strip(), "5")
        by_id(browser, "search-button").click()
        wait(browser, lambda d: len(shown_results(d)) == 1)
        heading = browser.find_element(By.CSS_SELECTOR, "#results h2")
        assert heading.get_attribute("title") == query.strip()
        assert heading.text.endswith("…") and len(heading.text) == 160
        assert not overflows(browser)
        follow_enqueued(browser)  # the task view, with its rows, in the same width
        assert not overflows(browser)
        loaded = {"flows": "#flow-list button", "indices": "#index-table tbody tr", "models": "#model-table tbody tr",
                  "chat": "#chat-model option", "search": "#results article"}
        for tab, content in loaded.items():
            browser.find_element(By.CSS_SELECTOR, f'nav button[data-tab="{tab}"]').click()
            wait(browser, lambda d, css=content: d.find_elements(By.CSS_SELECTOR, css))
            assert not overflows(browser), tab
        browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="flows"]').click()
        click(browser, '//ul[@id="flow-list"]//button[text()="bm25"]')
        wait(browser, lambda d: by_id(d, "flow-spec").get_attribute("value"))
        assert by_id(browser, "flow-spec").rect["x"] + by_id(browser, "flow-spec").rect["width"] <= 400
        assert not overflows(browser)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_the_tabs_are_a_tab_list_the_url_names_and_the_page_asks_for_nothing_it_lacks(browser, ui_app):
    open_page(browser, ui_app)  # the key kept by the browser: no request goes out without it below
    browser.get_log("browser")  # what earlier tests left in the console, and the keyless moment of typing it
    browser.refresh()
    wait(browser, lambda d: "bm25" in flow_names(d))
    wait(browser, lambda d: by_id(d, "health").text == "ready")
    icon = requests.get(ui_app.url + "/ui/favicon.svg", timeout=30)
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert browser.execute_script("return document.getElementById('api-key').form.id") == "key-form"
    tabs = browser.find_elements(By.CSS_SELECTOR, 'nav [role="tablist"] [role="tab"]')
    assert [t.get_attribute("aria-selected") for t in tabs] == ["true"] + ["false"] * 5
    tabs[1].click()
    assert [t.get_attribute("aria-selected") for t in tabs] == ["false", "true"] + ["false"] * 4
    panel = by_id(browser, tabs[1].get_attribute("aria-controls"))
    assert panel.get_attribute("role") == "tabpanel" and panel.is_displayed()
    assert browser.current_url.endswith("/ui/#chat")
    browser.refresh()  # the URL's tab opens
    wait(browser, lambda d: by_id(d, "tab-chat").is_displayed())
    assert not by_id(browser, "tab-search").is_displayed()
    problems = [entry["message"] for entry in browser.get_log("browser")
                if entry["level"] == "SEVERE" or "favicon" in entry["message"] or "Password field" in entry["message"]]
    assert problems == []


def test_the_arrow_keys_home_and_end_move_between_the_tabs_and_stop_at_the_ends(browser, ui_app):
    open_page(browser, ui_app)
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="search"]').click()  # focused and selected
    names = ["search", "chat", "tasks", "flows", "indices", "models"]

    def shown() -> tuple[list[str], str, str]:
        tabs = browser.find_elements(By.CSS_SELECTOR, 'nav [role="tablist"] [role="tab"]')
        selected = [t.get_attribute("data-tab") for t in tabs if t.get_attribute("aria-selected") == "true"]
        focused = browser.switch_to.active_element.get_attribute("data-tab")
        return selected, focused, urlsplit(browser.current_url).fragment

    # moveTab clamps at the ends (no wrap): Left on the first tab and Right on the last stay where they are
    for key, name in ((Keys.ARROW_RIGHT, "chat"), (Keys.ARROW_LEFT, "search"), (Keys.ARROW_LEFT, "search"),
                      (Keys.END, "models"), (Keys.ARROW_RIGHT, "models"), (Keys.ARROW_LEFT, "indices"),
                      (Keys.HOME, "search")):
        browser.switch_to.active_element.send_keys(key)
        assert shown() == ([name], name, name), (key, name)
        assert by_id(browser, f"tab-{name}").is_displayed()
        tab = by_id(browser, f"tabbutton-{name}")
        assert tab.get_attribute("tabindex") == "0"  # the one stop of Tab in the tab list
    assert [t.get_attribute("tabindex") for t in browser.find_elements(By.CSS_SELECTOR, '[role="tab"]')] \
        == ["0"] + ["-1"] * (len(names) - 1)


#: Each shown field's placeholder: its id, the placeholder's width in the field's font (measured on a canvas) and the
#: room the field has for it (its width less its padding).
PLACEHOLDER_ROOM = """const pen = document.createElement('canvas').getContext('2d');
    return [...document.querySelectorAll('input[placeholder], textarea[placeholder]')]
        .filter((field) => field.getClientRects().length).map((field) => {
            const style = getComputedStyle(field);
            pen.font = style.font;
            const room = field.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
            return [field.id, Math.ceil(pen.measureText(field.placeholder).width), Math.floor(room)];
        });"""


def test_every_placeholder_fits_in_its_field_in_a_wide_and_a_400_px_window(browser, ui_app):
    open_page(browser, ui_app)
    measured = {}
    try:
        for width in (1280, 400):
            if width != 1280:
                browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                        {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False})
            for tab in ("search", "chat", "indices"):
                browser.find_element(By.CSS_SELECTOR, f'nav button[data-tab="{tab}"]').click()
                wait(browser, lambda d, tab=tab: by_id(d, f"tab-{tab}").is_displayed())
                for field, text, room in browser.execute_script(PLACEHOLDER_ROOM):
                    measured[width, field] = (text, room)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    fields = {"api-key", "index", "queries", "chat-index", "upload-index", "upload-id"}
    assert {field for _, field in measured} == fields
    cut = {key: sizes for key, sizes in measured.items() if sizes[0] > sizes[1]}
    assert cut == {}, cut  # "only if the service has keys" and "the service's default index" were cut at 1280 px
