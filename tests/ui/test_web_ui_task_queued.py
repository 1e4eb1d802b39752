"""*Run as a task* showing the task it queued at once, not the one followed before. Same service and browser as the
other test_web_ui_*.py modules (package fixtures)."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.ui.browser import QUERY, fill_search, follow_enqueued, open_page

pytestmark = [pytest.mark.ray, pytest.mark.integration]

#: Every change of the page recorded as it happens (a MutationObserver): the URL's #part, the Tasks tab shown, and
#: the followed task's heading, so that a state shown for a moment is seen.
RECORDER = """window.seenStates = [];
new MutationObserver(() => window.seenStates.push([window.location.hash,
    !document.getElementById('tab-tasks').hidden,
    (document.querySelector('#task-detail h2') || {textContent: ''}).textContent]))
  .observe(document.body, {subtree: true, childList: true, attributes: true, characterData: true});"""


def test_run_as_a_task_shows_the_task_it_queued_never_the_one_followed_before(browser, ui_app):
    open_page(browser, ui_app)
    fill_search(browser, "bm25", QUERY, "2")
    before = follow_enqueued(browser)
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="search"]').click()
    browser.execute_script(RECORDER)
    after = follow_enqueued(browser)
    assert after != before
    seen = browser.execute_script("return window.seenStates")
    shown = [state for state in seen if state[1]]  # the Tasks tab in view
    assert shown and all(before not in hash_ and before not in heading for hash_, _, heading in shown), \
        [state for state in shown if before in state[0] or before in state[2]][:3]
    assert shown[0][0] == f"#tasks/{after}" and shown[0][2] in ("", f"task {after}: queued"), shown[0]
