"""Long text in a narrow window: an answer keeps its lines (a model's numbered steps, its paragraphs) as the Chat tab
keeps them, and one word wider than the window (a URL in an answer, a source's file name, an index name in a
refusal) wraps rather than making the whole page scroll sideways."""

from __future__ import annotations

import pytest

from tests.ui.browser import QUERY, by_id, error_text, fill_search, open_page, set_text, wait

pytestmark = [pytest.mark.ray, pytest.mark.integration]

SIDEWAYS = "return document.documentElement.scrollWidth > window.innerWidth"


def test_at_400_px_an_answer_keeps_its_lines_and_a_long_word_in_it_or_in_an_error_wraps(browser, ui_app):
    open_page(browser, ui_app)
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": 400, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    try:
        fill_search(browser, "bm25", QUERY, "5")
        set_text(browser, "index", "n" * 64)  # a valid name of no index: the service's refusal names it
        by_id(browser, "search-button").click()
        assert wait(browser, lambda d: error_text(d)).startswith("HTTP 422 (field: index): ")
        assert not browser.execute_script(SIDEWAYS)
        set_text(browser, "index", "")

        # an answer and its source as the Search tab, a task's view and a task's chat show them (views.js)
        lines = ["Bees make honey [1].", "", "1. Workers gather nectar.", "2. They fan it dry: https://example.org/"
                 + "honey" * 30]
        browser.execute_script("document.getElementById('results').replaceChildren(answerView(arguments[0], "
                               "[arguments[1]]))", "\n".join(lines), "[1] Honey (PDF, " + "comb" * 30 + ".pdf, p. 2)")
        shown = by_id(browser, "results").get_attribute("innerText")
        assert "\n".join(lines[2:]).split("https")[0] in shown  # the steps a line each, not run into one paragraph
        assert not browser.execute_script(SIDEWAYS)
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
