"""The page and a computer's clock set back while it waits: the seconds a search has run are counted on a clock no
setting moves. The clock's step is the page's own ``Date.now`` set back an hour (a test cannot set the machine's);
same service and browser as the other test_web_ui_*.py modules (package fixtures)."""

from __future__ import annotations

import re
import secrets

import pytest

from tests.serve.conftest import SlowRerankServer
from tests.ui.browser import QUERY, by_id, fill_search, open_page, shown_results, wait

pytestmark = [pytest.mark.ray, pytest.mark.integration]

#: The page's wall clock from now on an hour behind, as after the computer's clock was set back.
SET_BACK = "const real = Date.now.bind(Date); Date.now = () => real() - 3600 * 1000;"


def test_the_seconds_a_search_has_run_stay_counted_when_the_clock_is_set_back(browser, ui_app):
    """The status said ``running slow… -3599 s`` once the clock was set back an hour during the search."""
    with SlowRerankServer(seconds=0.5) as slow:  # 10 reranker calls of 0.5 s: the search runs for 5 s or more
        name = "ui-clock-" + secrets.token_hex(3)
        assert ui_app.api("PUT", f"/flows/{name}", slow.slow_flow(candidates=10)).status_code == 201
        try:
            open_page(browser, ui_app)
            fill_search(browser, name, QUERY, "5")
            by_id(browser, "search-button").click()
            wait(browser, lambda d: len(slow.times) >= 1)  # it runs
            browser.execute_script(SET_BACK)
            seen = []  # what the status says, read every 0.2 s for 2 s: the search runs on for 4 s or more
            wait(browser, lambda d: seen.append(by_id(d, "search-status").text) or len(seen) >= 10)
            ticks = [text for text in seen if text.startswith(f"running {name}… ")]
            assert ticks and all(re.fullmatch(rf"running {name}… \d+ s", text) for text in ticks), seen
            wait(browser, lambda d: len(shown_results(d)) == 1, seconds=120)
        finally:
            ui_app.api("DELETE", f"/flows/{name}")
