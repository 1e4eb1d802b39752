"""Text in other scripts as the page shows it: an Arabic or Hebrew query, title, passage and chat message read right
to left (``dir="auto"``: they were laid out left to right, the sentence's final stop at its start), and a passage or
query cut for its place ends at a whole character (``slice`` cut an emoji's surrogate pair in two: a ``�``). Same
service and browser as the other test_web_ui_*.py modules (package fixtures)."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.ui.browser import by_id, fill_search, open_page, set_text, shown_results, wait

pytestmark = [pytest.mark.ray, pytest.mark.integration]

CAIRO = "القاهرة هي عاصمة جمهورية مصر العربية وأكبر مدنها."
# 279 UTF-16 units before the emoji: the page's cut at 280 (PREVIEW_CHARS) fell between its two halves
LONG = "القاهرة " + "bee " * 67 + "bbb" + "😀" + " and the rest of the passage, which the cut leaves out."
LONE_HALF = r"return /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/.test(arguments[0]);"


def test_right_to_left_text_reads_right_to_left_and_a_cut_passage_keeps_its_emoji_whole(browser, ui_app):
    assert len(LONG[:LONG.index("😀")].encode("utf-16-le")) // 2 == 279
    documents = [{"id": "cairo", "title": "القاهرة", "text": CAIRO}, {"id": "long", "title": "طويل", "text": LONG}]
    queued = ui_app.api("POST", "/v1/indices/scripts_ui/documents", {"documents": documents}).json()
    wait(None, lambda _: ui_app.api("GET", f"/task/progress/{queued['task_id']}").json()["has_finished"], 180)

    open_page(browser, ui_app)
    fill_search(browser, "bm25", "القاهرة", "5")
    by_id(browser, "index").send_keys("scripts_ui")
    by_id(browser, "search-button").click()
    wait(browser, lambda d: len(shown_results(d)) == 1)

    direction = "return getComputedStyle(arguments[0]).direction"
    article = browser.find_element(By.CSS_SELECTOR, "#results article.result")
    assert browser.execute_script(direction, article.find_element(By.TAG_NAME, "h2")) == "rtl"
    cells = [(td.get_attribute("data-column"), browser.execute_script(direction, td))
             for td in article.find_elements(By.CSS_SELECTOR, 'td[data-column="title"], td[data-column="text"]')]
    assert sorted(cells) == [("text", "rtl")] * 2 + [("title", "rtl")] * 2, cells  # Arabic titles and texts
    assert browser.execute_script(direction, article.find_element(By.CSS_SELECTOR, 'td[data-column="score"]')) == "ltr"

    shown = [td.text for td in article.find_elements(By.CSS_SELECTOR, 'td[data-column="text"]')]
    cut = next(text for text in shown if text.startswith("القاهرة bee"))
    assert not browser.execute_script(LONE_HALF, cut) and "\ufffd" not in cut
    assert cut.split("…")[0] == LONG[:LONG.index("😀")]  # up to the emoji, not half of it

    long_query = "q" * 158 + "🇪🇬" + " القاهرة"  # its heading is cut at 159: inside the flag
    set_text(browser, "queries", long_query)  # ChromeDriver types no character beyond the BMP
    by_id(browser, "search-button").click()
    # a heading that held half a surrogate pair could not even be read back (ChromeDriver: "cannot deserialize")
    wait(browser, lambda d: any(heading.startswith("q") for heading, _ in shown_results(d)))
    heading = browser.find_element(By.CSS_SELECTOR, "#results article.result h2").text
    assert heading == "q" * 158 + "…"  # the flag left out whole, not one of its letters
