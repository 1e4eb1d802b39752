"""axe-core, the accessibility checker, run in the real page on its main states: without the key, a search's results,
a refusal, an answer with its sources, a chat, a task, each tab, and an error line at WCAG's reflow size (320 x 256
CSS px: a 1280 x 1024 window at 400% zoom). A serious or critical violation fails the test, named with its elements;
axe-core is the version tests/ui/package-lock.json pins, installed by make test (docs/serving.md, "Accessibility")."""

from __future__ import annotations

from pathlib import Path

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.ui.browser import (
    QUERY, by_id, chat_with, click, error_text, fill_search, open_page, rag_cut_short, set_text, shown_results, wait,
)

AXE_JS = Path(__file__).with_name("node_modules") / "axe-core" / "axe.min.js"

# skipped before the service and the browser start: without axe-core there is nothing to check with
pytestmark = [pytest.mark.ray, pytest.mark.integration, pytest.mark.skipif(
    not AXE_JS.is_file(), reason=f"axe-core is not installed ({AXE_JS} is missing): make test installs it with npm "
    "(npm ci --prefix tests/ui; apt-get install npm where there is none)")]

#: axe's impacts (minor, moderate, serious, critical) that fail the test.
FAILING = ["serious", "critical"]

RUN_AXE = """const impacts = arguments[0];
const done = arguments[arguments.length - 1];
axe.run(document, {resultTypes: ['violations']}).then(
  (result) => done(result.violations.filter((v) => impacts.includes(v.impact)).map((v) =>
    `${v.impact} ${v.id} (${v.help}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`)),
  (err) => done([`axe did not run: ${err}`]));"""


@pytest.fixture(scope="module")
def axe_script() -> str:
    return AXE_JS.read_text(encoding="utf-8")


def violations(driver, axe_script: str) -> list[str]:
    """The page's serious and critical violations as axe finds them now, one line each (axe put in the page once)."""
    if not driver.execute_script("return typeof axe === 'object'"):
        driver.execute_script(axe_script)
    limit = driver.timeouts.script
    driver.set_script_timeout(300)  # a limit, not a measure: axe reads the whole page, slowly on busy cores
    try:
        return driver.execute_async_script(RUN_AXE, FAILING)
    finally:
        driver.set_script_timeout(limit)


#: Whether a box is scrolled to its end.
AT_THE_END = "const b = arguments[0]; return b.scrollTop > 0 && b.scrollTop + b.clientHeight >= b.scrollHeight - 1"


def open_tab(driver, tab: str) -> None:
    driver.find_element(By.CSS_SELECTOR, f'nav button[data-tab="{tab}"]').click()
    wait(driver, lambda d: by_id(d, f"tab-{tab}").is_displayed())


#: What each tab shows once its data is read.
LOADED = {"search": "#flow option", "chat": "#chat-model option", "tasks": "#task-counts:not(:empty)",
          "flows": "#flow-list button", "indices": "#index-table tbody tr", "models": "#model-table tbody tr"}


def test_the_pages_main_states_have_no_serious_or_critical_accessibility_violation(browser, ui_app, axe_script):
    found = {}

    def check(state: str) -> None:
        found[state] = violations(browser, axe_script)

    browser.get(ui_app.url + "/")
    browser.execute_script("window.localStorage.clear()")
    open_page(browser, ui_app, typed=False)
    wait(browser, lambda d: error_text(d).startswith("HTTP 401"))
    check("without the key: the refusal named")
    open_page(browser, ui_app)
    check("the Search tab, nothing searched")
    fill_search(browser, "bm25", QUERY, "5")
    by_id(browser, "search-button").click()
    wait(browser, lambda d: len(shown_results(d)) == 1)
    click(browser, '(//table[contains(@class, "hits")]//button[contains(@class, "link")])[1]')  # a hit opened
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#results tr.fields"))
    check("a search's results, a hit opened")
    set_text(browser, "index", "no_such_index")
    by_id(browser, "search-button").click()
    wait(browser, lambda d: error_text(d).startswith("HTTP 422"))
    check("a refused search: the error line, its field marked")
    set_text(browser, "index", "")
    by_id(browser, "enqueue-button").click()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#task-detail h2"))
    check("a task followed (running, or finished already)")
    wait(browser, lambda d: by_id(d, "task-chat-form").is_displayed(), 300)
    check("a finished task, its question box")
    open_tab(browser, "flows")
    click(browser, '//ul[@id="flow-list"]//button[text()="bm25"]')
    wait(browser, lambda d: by_id(d, "flow-spec").get_attribute("value"))
    check("the Flows tab, a flow opened")
    for tab in ("chat", "indices", "models"):
        open_tab(browser, tab)
        wait(browser, lambda d, css=LOADED[tab]: d.find_elements(By.CSS_SELECTOR, css))
        check(f"the {tab.title()} tab")
    assert found == dict.fromkeys(found, [])


@pytest.mark.slow  # the embedded model writes the answers
def test_an_answer_with_its_sources_and_a_chat_have_no_serious_or_critical_accessibility_violation(
        browser, ui_app, axe_script):
    found = {}
    with rag_cut_short(ui_app, "axe_") as rag:
        open_page(browser, ui_app)
        fill_search(browser, rag, QUERY, "3")
        by_id(browser, "search-button").click()
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#results .answer"), 300)
        found["an answer with its sources"] = violations(browser, axe_script)
        chat_with(browser, rag)
        by_id(browser, "chat-input").send_keys(QUERY, Keys.CONTROL, Keys.ENTER)
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#chat-log .turn.assistant:not(.pending)"), 300)
        found["a chat's answer"] = violations(browser, axe_script)
    assert found == dict.fromkeys(found, [])


def test_at_320_by_256_px_an_error_longer_than_its_line_is_read_to_its_end_by_keyboard(browser, ui_app, axe_script):
    """The error line is at most 40% of the window high (style.css): there a refusal of a few lines scrolled inside it,
    which no key could reach (axe: scrollable-region-focusable, serious): its end, "(the Indices tab lists the
    indices)", was out of sight. The line is now a stop of Tab while it scrolls, and the End key scrolls it."""
    open_page(browser, ui_app)
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": 320, "height": 256, "deviceScaleFactor": 1, "mobile": False})
    try:
        fill_search(browser, "bm25", QUERY, "5")
        set_text(browser, "index", "no_such_index_" + "x" * 48)
        by_id(browser, "search-button").click()
        wait(browser, lambda d: error_text(d).startswith("HTTP 422"))
        box = by_id(browser, "error")
        assert browser.execute_script("return arguments[0].scrollHeight > arguments[0].clientHeight", box)
        assert violations(browser, axe_script) == []
        # from the first field of the form, Shift+Tab goes back to the error line (before the tabs' panel)
        by_id(browser, "flow").send_keys(Keys.SHIFT, Keys.TAB)
        assert browser.switch_to.active_element.get_attribute("id") == "error"
        ActionChains(browser).send_keys(Keys.END).perform()
        wait(browser, lambda d: d.execute_script(AT_THE_END, box))
        set_text(browser, "index", "")
        by_id(browser, "search-button").click()  # the refusal gone: the line is no stop of Tab any more
        wait(browser, lambda d: len(shown_results(d)) == 1)
        assert error_text(browser) == "" and box.get_attribute("tabindex") is None
        for tab, content in LOADED.items():  # and each tab at that size
            open_tab(browser, tab)
            wait(browser, lambda d, css=content: d.find_elements(By.CSS_SELECTOR, css))
            assert violations(browser, axe_script) == [], tab
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
