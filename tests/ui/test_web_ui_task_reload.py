"""A reload of the page keeps the task followed and its conversation: the task's id is in the URL
(``#tasks/<id>``), and the page reads the task's stored chat back (``GET /task/{id}/chats``). Before, a reload opened
the Tasks tab with no task shown, and a task opened again showed none of the questions asked of it, although the
service kept them."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.ui.browser import by_id, click, fill_search, task_to_ask, wait

pytestmark = [pytest.mark.ray, pytest.mark.integration]


def turns(driver) -> list[tuple[str, str]]:
    """The task chat's turns as shown: (question, answer's first line)."""
    return [(turn.find_element(By.CSS_SELECTOR, ".turn.user").text,
             turn.find_element(By.CSS_SELECTOR, ".answer p").text)
            for turn in driver.find_elements(By.CSS_SELECTOR, "#task-chat-log .task-turn")]


def shows_task_chat(driver, task_id: str) -> bool:
    form = by_id(driver, "task-chat-form")
    return form.get_attribute("data-task") == task_id and form.is_displayed()


@pytest.mark.slow  # the embedded model answers in the replica
def test_a_reload_shows_the_task_and_its_conversation_and_a_follow_up_continues_it(browser, ui_app):
    task_id = task_to_ask(browser, ui_app)
    question = "which insects make honey?"
    by_id(browser, "task-chat-input").send_keys(question)
    by_id(browser, "task-chat-send").click()
    wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#task-chat-log .answer"), seconds=300)
    asked = turns(browser)
    assert [q for q, _ in asked] == [question]

    browser.refresh()  # the key is kept by the browser; the task, its results and its chat come back
    wait(browser, lambda d: shows_task_chat(d, task_id), seconds=60)
    assert browser.current_url.endswith(f"/ui/#tasks/{task_id}")  # a link to the task followed
    assert wait(browser, lambda d: turns(d), seconds=30) == asked
    assert browser.find_element(By.CSS_SELECTOR, "#task-detail h2").text == f"task {task_id}: finished"
    stored = ui_app.api("GET", f"/task/{task_id}/chats").json()["chats"]
    assert len(stored) == 1 and [m["role"] for m in stored[0]["messages"]] == ["user", "assistant"]

    by_id(browser, "task-chat-input").send_keys("How do they make it?")  # asked with the chat before the reload
    by_id(browser, "task-chat-send").click()
    shown = wait(browser, lambda d: next((e.text for e in d.find_elements(By.CSS_SELECTOR, "#task-chat-log .searched")),
                                         None), seconds=300)
    assert question in shown
    stored = ui_app.api("GET", f"/task/{task_id}/chats").json()["chats"]
    assert len(stored) == 1 and len(stored[0]["messages"]) == 4  # the same chat, not a new one

    # another task opened, then this one again from the list: its conversation is read back as well
    by_id(browser, "tabbutton-search").click()
    fill_search(browser, "bm25", "gothic cathedrals", "5")
    by_id(browser, "enqueue-button").click()
    wait(browser, lambda d: by_id(d, "task-chat-form").get_attribute("data-task") not in ("", task_id)
         and by_id(d, "task-chat-form").is_displayed(), seconds=120)
    assert by_id(browser, "task-chat-log").text == ""
    browser.refresh()
    click(browser, f'//tr[@data-task="{task_id}"]//button[@class="link"]')
    wait(browser, lambda d: shows_task_chat(d, task_id) and len(turns(d)) == 2, seconds=60)
    assert browser.current_url.endswith(f"/ui/#tasks/{task_id}")
