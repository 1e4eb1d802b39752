"""The Tasks tab: a search run as a task followed to its rows for every query, a flow that answers shown query by
query, and a question about a finished task answered from its rows as the API answers it."""

from __future__ import annotations

from collections import Counter

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from tests.ui.browser import (QUERY, by_id, click, conversation_above_the_box, error_text, fill_search, follow_enqueued,
                              open_page, searched_line, task_to_ask, wait)

pytestmark = [pytest.mark.ray, pytest.mark.integration]


def column(element, name: str) -> list[str]:
    """One column of the hits table inside ``element``, by its heading."""
    heads = [th.text for th in element.find_elements(By.CSS_SELECTOR, "table.hits th")]
    return [r.find_elements(By.TAG_NAME, "td")[heads.index(name)].text
            for r in element.find_elements(By.CSS_SELECTOR, "table.hits tbody tr")]


def task_groups(driver, data: list[dict]) -> list[tuple]:
    """Per query the task view shows: (qid, heading, docnos shown); and the same from the task's rows."""
    qids = list(dict.fromkeys(str(row["qid"]) for row in data))
    expected = [(qid, next(r["query"] for r in data if str(r["qid"]) == qid),
                 [r["docno"] for r in data if str(r["qid"]) == qid][:50]) for qid in qids]
    shown = [(g.get_attribute("data-qid"), g.find_element(By.TAG_NAME, "h3").text, column(g, "docno"))
             for g in driver.find_elements(By.CSS_SELECTOR, "#task-detail .task-query")]
    return shown, expected


def test_a_task_is_followed_to_its_rows_shown_for_every_query(browser, ui_app):
    open_page(browser, ui_app)
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="tasks"]').click()
    wait(browser, lambda d: by_id(d, "tab-tasks").is_displayed())
    assert not by_id(browser, "task-chat-form").is_displayed()  # no finished task followed yet
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="search"]').click()
    fill_search(browser, "bm25", f"{QUERY}\ngothic cathedrals\nzyxwvut", "60")  # the last finds nothing
    # each time the task's view is drawn: the state its heading says, and the state its row in the list says
    browser.execute_script("""window.seen = [];
        new MutationObserver(() => {
          const heading = document.querySelector("#task-detail h2");
          const row = heading && document.querySelector(
            `#task-table tr[data-task="${heading.closest("[data-task]").dataset.task}"] td[data-column="status"]`);
          if (row) window.seen.push([heading.textContent.split(": ").pop(), row.textContent]);
        }).observe(document.getElementById("task-detail"), {childList: true, subtree: true});""")
    task_id = follow_enqueued(browser)

    body = ui_app.api("GET", f"/task/progress/{task_id}").json()
    assert body["status"] == "finished"
    detail = by_id(browser, "task-detail")
    assert detail.find_element(By.TAG_NAME, "progress").get_attribute("value") == "100"
    shown, expected = task_groups(browser, body["result"]["data"])
    # a query with no row is listed too (it was left out: the task seemed to have been asked two questions)
    assert shown == [*expected, ("3", "zyxwvut", [])] and [q for _, q, _ in shown] == [QUERY, "gothic cathedrals",
                                                                                       "zyxwvut"]
    counts = Counter(str(row["qid"]) for row in body["result"]["data"])
    assert max(counts.values()) == 60  # Results per query holds for a task too; past 50 the page says so
    for group in detail.find_elements(By.CSS_SELECTOR, ".task-query"):
        rows = counts[group.get_attribute("data-qid")]
        assert [p.text for p in group.find_elements(By.CSS_SELECTOR, ":scope > p.status")] == (
            [f"first 50 of {rows} rows"] if rows > 50 else ["no hits"] if rows == 0 else [])
    assert by_id(browser, "task-chat-form").is_displayed()  # a finished task can be asked about
    row = wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, f'#task-table tr[data-task="{task_id}"]').text)
    assert "finished" in row and "bm25" in row  # the list, refreshed when the task ended
    done, total = body["progress"]["pipeline_progress"].split("/")
    assert browser.find_element(By.CSS_SELECTOR, f'#task-table tr[data-task="{task_id}"] td[data-column="steps done"]'
                                ).text == f"{done} / {total}"  # its steps done of its steps
    seen = browser.execute_script("return window.seen")
    # while it ran, its row in the list said what its view said (it stayed "queued" until the list was read again)
    assert seen and seen[-1] == ["finished", "finished"] and all(view == row for view, row in seen), seen


@pytest.mark.slow  # the embedded model answers in the replica
def test_a_question_about_a_finished_task_is_answered_from_its_rows_as_the_api_answers_it(browser, ui_app):
    task_id = task_to_ask(browser, ui_app)
    question = "which insects make honey?"
    browser.execute_script("""  // every text the answer still being written shows, as the page renders it
        window.written = [];
        new MutationObserver(() => document.querySelectorAll("#task-chat-log .pending pre").forEach(
            (pre) => window.written.push(pre.textContent))).observe(document.getElementById("task-chat-log"),
                                                                   {childList: true, subtree: true});""")
    by_id(browser, "task-chat-input").send_keys(question)
    by_id(browser, "task-chat-send").click()
    shown = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#task-chat-log .answer"), seconds=300)[0]

    chat_id = ui_app.api("GET", f"/task/chat/new?task_id={task_id}").text
    reply = ui_app.api("GET", f"/task/chat/{chat_id}?message={question}").json()
    assert shown.find_element(By.TAG_NAME, "p").text == f"Answer: {reply['answer'] or '(no answer)'}"
    written = [text for text in browser.execute_script("return window.written") if text != "…"]
    assert written and reply["answer"].startswith(written[-1].strip())  # the answer showed as it was written
    sources = [li.text for li in shown.find_elements(By.CSS_SELECTOR, "ol.sources li")]
    assert [s.rsplit("(", 1)[-1].rstrip(")") for s in sources] == reply["sources"]
    assert by_id(browser, "task-chat-input").get_attribute("value") == ""
    assert browser.find_elements(By.CSS_SELECTOR, "#task-chat-log .searched") == []  # a first question
    assert conversation_above_the_box(browser, "task-chat-log", "task-chat-input")  # as the Chat tab's

    by_id(browser, "task-chat-input").send_keys("How do they make it?")  # a follow-up, asked with the chat
    by_id(browser, "task-chat-send").click()
    asked = wait(browser, lambda d: next((e.text for e in d.find_elements(By.CSS_SELECTOR, "#task-chat-log .searched")),
                                         None), seconds=300)
    follow = ui_app.api("GET", f"/task/chat/{chat_id}?message=How do they make it?").json()
    assert asked == searched_line("asked as", follow["standalone_query"]) and question in asked
    assert browser.find_element(By.CSS_SELECTOR, "#task-chat-log .searched").get_attribute("title") == follow[
        "standalone_query"]  # the whole of it


@pytest.mark.slow  # the embedded model answers, in a task on Ray
def test_a_task_of_a_flow_that_answers_shows_each_querys_answer_and_sources(browser, ui_app):
    open_page(browser, ui_app)
    fill_search(browser, "rag", f"{QUERY}\ngothic cathedrals", "5")
    task_id = follow_enqueued(browser)

    result = ui_app.api("GET", f"/task/progress/{task_id}").json()["result"]
    shown, expected = task_groups(browser, result["data"])
    assert shown == expected and len(shown) == 2
    for group in browser.find_elements(By.CSS_SELECTOR, "#task-detail .task-query"):
        metadata = result["aggregated_data"][group.get_attribute("data-qid")]
        answer = group.find_element(By.CSS_SELECTOR, ".answer")
        assert answer.find_element(By.TAG_NAME, "p").text == f"Answer: {metadata['answer'] or '(no answer)'}"
        sources = [li.text for li in answer.find_elements(By.CSS_SELECTOR, ".sources li")]
        assert sources == metadata["references"] if metadata.get("references") else len(sources) == len(
            metadata["sources"])


@pytest.mark.slow  # the embedded model answers in the replica
def test_an_answer_being_written_for_one_task_stays_with_that_task(browser, ui_app):
    """Asked about task A, then task B opened before the answer came: A's conversation was drawn under B's results,
    B's Ask stayed off, and A's answer emptied the box where B's question was being typed."""
    open_page(browser, ui_app)
    tasks = []
    for _ in range(2):
        by_id(browser, "tabbutton-search").click()  # an enqueued task opens the Tasks tab
        fill_search(browser, "bm25", QUERY, "5")
        by_id(browser, "enqueue-button").click()
        wait(browser, lambda d: by_id(d, "task-chat-form").is_displayed()
             and by_id(d, "task-chat-form").get_attribute("data-task") not in tasks, seconds=120)
        tasks.append(by_id(browser, "task-chat-form").get_attribute("data-task"))
    first, second = tasks
    click(browser, f'//tr[@data-task="{first}"]//button[@class="link"]')  # found again if the list redraws
    wait(browser, lambda d: by_id(d, "task-chat-form").get_attribute("data-task") == first
         and by_id(d, "task-chat-form").is_displayed(), seconds=60)
    by_id(browser, "task-chat-input").send_keys("which insects make honey?")
    by_id(browser, "task-chat-send").click()
    click(browser, f'//tr[@data-task="{second}"]//button[@class="link"]')
    wait(browser, lambda d: by_id(d, "task-chat-form").get_attribute("data-task") == second
         and by_id(d, "task-chat-form").is_displayed(), seconds=60)
    assert by_id(browser, "task-chat-send").is_enabled()  # B's Ask is B's
    assert by_id(browser, "task-chat-input").get_attribute("value") == ""  # A's question is not B's
    by_id(browser, "task-chat-input").send_keys("typed for B")
    wait(browser, lambda d: d.execute_script(f"return (taskChats.get('{first}') || {{turns: []}}).turns.length"),
         seconds=300)  # A's answer has come
    assert "which insects make honey?" not in by_id(browser, "task-chat-log").text  # not under B's results
    assert by_id(browser, "task-chat-input").get_attribute("value") == "typed for B"
    click(browser, f'//tr[@data-task="{first}"]//button[@class="link"]')
    wait(browser, lambda d: "which insects make honey?" in by_id(d, "task-chat-log").text
         and d.find_elements(By.CSS_SELECTOR, "#task-chat-log .answer"), seconds=60)
    assert by_id(browser, "task-chat-input").get_attribute("value") == ""  # asked and answered: no draft left
    click(browser, f'//tr[@data-task="{second}"]//button[@class="link"]')
    wait(browser, lambda d: by_id(d, "task-chat-form").get_attribute("data-task") == second
         and by_id(d, "task-chat-form").is_displayed(), seconds=60)
    assert by_id(browser, "task-chat-input").get_attribute("value") == "typed for B"  # B's draft, back with B


def test_a_double_click_on_run_as_a_task_queues_one_task_and_a_blank_question_is_refused(browser, ui_app):
    """The button stayed on while its request ran: a double click queued the same task twice. A question of only
    spaces did nothing at all."""
    def tasks_of_the_key() -> int:
        return sum(ui_app.api("GET", "/tasks").json()["counts"].values())

    before = tasks_of_the_key()
    open_page(browser, ui_app)
    fill_search(browser, "bm25", QUERY, "5")
    ActionChains(browser).double_click(by_id(browser, "enqueue-button")).perform()
    wait(browser, lambda d: by_id(d, "tab-tasks").is_displayed())
    wait(browser, lambda d: any(h.text.endswith(": finished") for h in d.find_elements(By.CSS_SELECTOR,
                                                                                         "#task-detail h2")), 300)
    assert tasks_of_the_key() == before + 1

    wait(browser, lambda d: by_id(d, "task-chat-form").is_displayed())
    box = by_id(browser, "task-chat-input")
    box.send_keys("   ")
    by_id(browser, "task-chat-send").click()
    refused = """const box = arguments[0];
        return [box.validity.valid, box.validationMessage, document.activeElement === box];"""
    assert browser.execute_script(refused, box) == [False, "Type a message.", True]
    box.send_keys(Keys.ENTER)  # Enter in the box: the same
    assert browser.execute_script(refused, box) == [False, "Type a message.", True]
    assert browser.find_elements(By.CSS_SELECTOR, "#task-chat-log .task-turn") == []  # nothing asked
    assert by_id(browser, "task-chat-send").is_enabled() and error_text(browser) == ""
