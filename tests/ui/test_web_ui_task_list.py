"""The Tasks tab's list: *older tasks* adds the next pages of ``GET /tasks`` until every task is listed once, and
*cancel* on a running task, once confirmed, ends it cancelled in the service, its Ray work stopped; a row says
its steps done of its steps."""

from __future__ import annotations

import datetime
import secrets
import time
import zoneinfo

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from serve.tasks.taskstore import TaskStore
from tests.serve.conftest import SlowRerankServer
from tests.ui.browser import QUERY, by_id, click, dialog, error_text, fill_search, open_page, wait

pytestmark = [pytest.mark.ray, pytest.mark.integration]

OLDER = '//p[@id="task-counts"]//button[text()="older tasks"]'


def listed_ids(service) -> list[str]:
    """Every task of the key, newest first, read a page at a time as the API pages them."""
    ids, before = [], ""
    while True:
        page = service.api("GET", f"/tasks{before}").json()
        ids += [task["id"] for task in page["tasks"]]
        if not page["next"]:
            return ids
        before = f"?before={page['next']}"


def shown_ids(driver) -> list[str]:
    return [row.get_attribute("data-task") for row in driver.find_elements(By.CSS_SELECTOR, "#task-table tbody tr")]


def open_tasks(driver) -> None:
    driver.find_element(By.CSS_SELECTOR, 'nav button[data-tab="tasks"]').click()
    wait(driver, lambda d: by_id(d, "tab-tasks").is_displayed() and shown_ids(d))


@pytest.mark.slow  # 205 tasks written, three pages read and 205 tasks deleted through the API
def test_older_tasks_adds_the_next_pages_until_every_task_is_listed_once(browser, ui_app):
    store = TaskStore(ui_app.store_url)  # 205 ended tasks of the page's key: three pages of GET /tasks at least
    made = [store.create_task("ui", "bm25", {}, [{"qid": "1", "query": f"query {n}"}], ["bm25"]) for n in range(205)]
    for n, task_id in enumerate(made):
        store.finish(task_id, "cancelled" if n % 2 else "failed", error=None if n % 2 else "made by the test")
    try:
        expected = listed_ids(ui_app)
        assert len(expected) >= 205 and len(set(expected)) == len(expected)
        open_page(browser, ui_app)
        open_tasks(browser)
        wait(browser, lambda d: shown_ids(d) == expected[:100])
        counts = ui_app.api("GET", "/tasks").json()["counts"]
        assert by_id(browser, "task-counts").text == ", ".join(f"{n} {state}" for state, n in counts.items()) \
            + " older tasks"
        # a double click is two clicks: the page must not add the same page twice
        ActionChains(browser).double_click(browser.find_element(By.XPATH, OLDER)).perform()
        wait(browser, lambda d: len(shown_ids(d)) >= 200 and d.find_elements(By.XPATH, OLDER))
        time.sleep(1)  # a second page the second click would have added
        assert shown_ids(browser) == expected[:200]
        while len(shown_ids(browser)) < len(expected):
            shown = len(shown_ids(browser))
            click(browser, OLDER)
            wait(browser, lambda d, before=shown: len(shown_ids(d)) > before)
        assert shown_ids(browser) == expected
        assert browser.find_elements(By.XPATH, OLDER) == []  # the last page: nothing older
        assert error_text(browser) == ""
    finally:
        for task_id in made:
            ui_app.api("DELETE", f"/task/{task_id}")


@pytest.mark.slow  # a task that runs until it is cancelled, then seconds to see that nothing more runs
def test_cancel_on_a_running_task_ends_it_cancelled_and_its_work_stops(browser, ui_app):
    with SlowRerankServer(seconds=0.5) as slow:  # 40 reranker calls of 0.5 s: the task runs for 20 s
        name = "ui-slow-" + secrets.token_hex(3)
        assert ui_app.api("PUT", f"/flows/{name}", slow.slow_flow()).status_code == 201
        try:
            open_page(browser, ui_app)
            fill_search(browser, name, QUERY, "5")
            by_id(browser, "enqueue-button").click()  # Tasks opens, following it
            heading = wait(browser, lambda d: next((h.text for h in d.find_elements(By.CSS_SELECTOR, "#task-detail h2")
                                                    if h.text.endswith(": running")), None), seconds=120)
            task_id = heading.removeprefix("task ").removesuffix(": running")
            wait(browser, lambda d: len(slow.times) >= 2, seconds=120)  # the slow step is at work
            row = f'//tr[@data-task="{task_id}"]'
            # on the keyboard, its cancel button keeps the focus while the task is read again and drawn (the button
            # was drawn anew at every poll, and the focus fell to the page's body)
            browser.execute_script("""arguments[0].focus(); window.drawn = 0;
                new MutationObserver(() => window.drawn++).observe(document.getElementById("task-detail"),
                                                                   {childList: true});""",
                                   browser.find_element(By.XPATH, f'{row}//button[text()="cancel"]'))
            wait(browser, lambda d: d.execute_script("return window.drawn") >= 2)
            assert browser.switch_to.active_element.get_attribute("aria-label") == f"cancel task {task_id}"
            click(browser, f'{row}//button[text()="cancel"]')  # asked first, as a delete is: not cancelled
            assert dialog(browser).text == f"Cancel the task {task_id}? Its work stops and cannot be resumed."
            dialog(browser).dismiss()
            time.sleep(1)
            assert ui_app.api("GET", f"/task/progress/{task_id}").json()["status"] == "running"
            click(browser, f'{row}//button[text()="cancel"]')
            dialog(browser).accept()

            wait(browser, lambda d: d.find_element(By.XPATH, f'{row}/td[@data-column="status"]').text == "cancelled")
            assert browser.find_element(By.XPATH, f'{row}/td[@data-column="actions"]/button').text == "delete"
            wait(browser, lambda d: by_id(d, "task-detail").find_element(By.TAG_NAME, "h2").text
                 == f"task {task_id}: cancelled")
            body = ui_app.api("GET", f"/task/progress/{task_id}").json()
            assert (body["status"], body["has_finished"]) == ("cancelled", True)
            calls = len(slow.times)
            time.sleep(3)
            assert len(slow.times) <= calls + 1 < 40  # its Ray work stopped (one call may have been under way)
            assert error_text(browser) == ""
        finally:
            ui_app.api("DELETE", f"/flows/{name}")


def test_deleting_a_task_by_keyboard_leaves_the_focus_on_the_next_rows_delete(browser, ui_app):
    store = TaskStore(ui_app.store_url)
    made = [store.create_task("ui", "bm25", {}, [{"qid": "1", "query": "q"}], ["bm25"]) for _ in range(3)]
    for task_id in made:
        store.finish(task_id, "failed", error="made by the test")
    try:
        open_page(browser, ui_app)
        open_tasks(browser)
        shown = wait(browser, lambda d: (lambda ids: ids if set(made) <= set(ids) else None)(shown_ids(d)))
        assert {browser.find_element(By.XPATH, f'//tr[@data-task="{t}"]/td[@data-column="steps done"]').text
                for t in made} == {"0 / 1"}  # steps done of the task's steps (GET /tasks's steps_total)
        middle = sorted(made, key=shown.index)[1]
        after = shown[shown.index(middle) + 1]  # the row under it
        browser.find_element(By.XPATH, f'//tr[@data-task="{middle}"]//button[text()="delete"]').send_keys(Keys.ENTER)
        dialog(browser).accept()
        wait(browser, lambda d: middle not in shown_ids(d))
        assert wait(browser, lambda d: d.switch_to.active_element.get_attribute("aria-label"), 10) \
            == f"delete task {after}"
    finally:
        for task_id in made:
            ui_app.api("DELETE", f"/task/{task_id}")


def test_a_tasks_created_time_is_shown_in_the_browsers_zone_and_names_it(browser, ui_app):
    """In a browser in Chatham (UTC+13:45 in summer, +12:45 in winter) the list said ``12/8/2026, 1:09:27 PM``: the
    local time, but nothing to tell a reader elsewhere (a shared screen, a pasted report) which zone it was in."""
    store = TaskStore(ui_app.store_url)
    task_id = store.create_task("ui", "bm25", {}, [{"qid": "1", "query": "q"}], ["bm25"])
    store.finish(task_id, "failed", error="made by the test")
    created = store.task(task_id, "ui")["created"]
    there = datetime.datetime.fromtimestamp(created, zoneinfo.ZoneInfo("Pacific/Chatham"))
    hours, minutes = divmod(int(there.utcoffset().total_seconds()) // 60, 60)
    browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "Pacific/Chatham"})
    try:
        open_page(browser, ui_app)
        open_tasks(browser)
        cell = f'//tr[@data-task="{task_id}"]/td[@data-column="created"]'
        shown = wait(browser, lambda d: d.find_elements(By.XPATH, cell) and d.find_element(By.XPATH, cell).text)
        assert f"{there.minute:02d}:{there.second:02d}" in shown, shown  # Chatham's time (45 minutes off UTC's)
        assert shown.endswith(f"GMT+{hours}:{minutes:02d}"), shown  # and its zone
    finally:
        browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": ""})
        ui_app.api("DELETE", f"/task/{task_id}")
