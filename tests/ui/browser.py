"""The page driven as a user drives it, and the service set up for it: plain functions the web UI's tests
import (the browser and the service are tests/ui/conftest.py's package fixtures)."""

from __future__ import annotations

import contextlib
import re
import secrets

from selenium.common.exceptions import (
    ElementNotInteractableException, NoAlertPresentException, StaleElementReferenceException,
)
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

QUERY = "which insects make honey and pollinate flowers"


def wait(driver, condition, seconds: float = 60, *, not_yet: tuple[type[Exception], ...] = ()):
    """``condition``'s first true value; an element the page re-rendered while it was read means "not yet", and so do
    the exceptions of ``not_yet``."""
    return WebDriverWait(driver, seconds, poll_frequency=0.2,
                         ignored_exceptions=(StaleElementReferenceException, *not_yet)).until(lambda d: condition(d))


def dialog(driver, seconds: float = 10):
    """The page's open alert or confirm dialog, waited for: a click's handler may open it only after an ``await``
    (the Flows tab's delete), and ``switch_to.alert`` right after the click found none on busy cores (CI,
    2026-12-07: test_a_flow_is_read_changed_saved_used_and_deleted...)."""
    return wait(driver, lambda d: d.switch_to.alert, seconds, not_yet=(NoAlertPresentException,))


def heard(driver, css: str) -> list[tuple[str, str]] | None:
    """The (text, name a screen reader hears) of the buttons at ``css``, or None ("not yet") when the page drew them
    again while they were read: Chrome names a button already taken out of the page "" and raises nothing."""
    buttons = driver.find_elements(By.CSS_SELECTOR, css)
    read = [(button.text, button.accessible_name) for button in buttons]
    return read if driver.execute_script("return [...arguments].every((b) => b.isConnected)", *buttons) else None


def click(driver, xpath: str) -> None:
    """Click the element at ``xpath``, found again if the page re-renders it in between (a list reloading), and
    tried again while it cannot take a click yet (a row's button the page is still drawing)."""
    wait(driver, lambda d: d.find_element(By.XPATH, xpath).click() or True, not_yet=(ElementNotInteractableException,))


def press(driver, xpath: str, *keys: str) -> None:
    """Send ``keys`` to the element at ``xpath``, as ``click`` clicks: a row's share button found, then "not
    interactable" for a moment, failed a CI run (test_share_and_delete_by_keyboard..., 2026-12-06 and -07)."""
    wait(driver, lambda d: d.find_element(By.XPATH, xpath).send_keys(*keys) or True,
         not_yet=(ElementNotInteractableException,))


def by_id(driver, element_id: str):
    return driver.find_element(By.ID, element_id)


def option_values(driver, element_id: str) -> list[str]:
    """The values of a ``<select>``'s options, read in one command: Selenium's ``Select(...).options`` and a
    ``get_attribute`` per option took a command each, and polled in ``wait`` they were a third of the web UI tests'
    WebDriver commands (each about 11 ms of Chromium's and its driver's CPU)."""
    return driver.execute_script("return [...document.getElementById(arguments[0]).options].map((o) => o.value)",
                                 element_id)


def cell_texts(driver, rows_css: str) -> list[list[str]]:
    """The text of each cell of the table rows at ``rows_css``, read in one command (a command per cell, polled in
    ``wait``, was most of an index test's commands), as Selenium's ``text`` reads it: "" for a cell not shown (a
    hidden tab's table), trimmed."""
    return driver.execute_script(SHOWN_TEXT + "return [...document.querySelectorAll(arguments[0])].map("
                                 "(row) => [...row.querySelectorAll('td')].map(shownText))", rows_css)


#: A node's text as Selenium's ``text`` reads it: "" where the page does not show it (``display: none`` on it or a
#: parent, ``visibility: hidden``), else its rendered text, trimmed.
SHOWN_TEXT = ("const shownText = (node) => node.checkVisibility({visibilityProperty: true}) ? "
              "node.innerText.trim() : '';\n")


def flow_names(driver) -> list[str]:
    return option_values(driver, "flow")


def open_page(driver, service, typed: bool = True) -> None:
    """The page from the service's root, with the key typed in (or, not ``typed``, whatever the browser kept), and
    the Chat tab's conversation that an earlier test left in the browser tab (``sessionStorage``) gone."""
    driver.execute_script("try { window.sessionStorage.clear(); } catch (err) {}")  # (about:blank has none)
    driver.get(service.url + "/")
    wait(driver, lambda d: d.current_url == service.url + "/ui/")
    if typed:
        field = by_id(driver, "api-key")
        field.clear()
        field.send_keys(service.key, Keys.TAB)  # the change event: saved, flows reloaded
        wait(driver, lambda d: "bm25" in flow_names(d))


def error_text(driver) -> str:
    box = by_id(driver, "error")
    return "" if box.get_attribute("hidden") is not None else box.text


#: The service's pointers to its routes, and the page's tab that the page names for each (serve/ui/api.js).
ROUTE_HINTS = {"GET /v1/indices lists": "the Indices tab lists", "GET /v1/models lists": "the Models tab lists",
               "(GET /v1/models)": "(the Models tab lists it)",
               "GET /flows lists": "the Flows tab lists", "GET /task/progress/{id} follows": "the Tasks tab follows",
               "(GET /task/progress/{id})": "(the Tasks tab follows it)",
               'shares it with PATCH /v1/indices/{name} and {"shared": true}':
                   "shares it with the share button of the Indices tab"}


#: The service's settings named in its messages, and what the page says instead (serve/ui/api.js's SETTING_HINTS).
SETTING_HINTS = {"outside its index roots (args.service.index_roots)": "outside the folders it reads indices from",
                 " (args.service.index_roots)": ""}


def page_text(message: str) -> str:
    """A message as the error line shows it: its `backticks` as <code>, so without them (serve/ui/api.js showError)."""
    return re.sub(r"`([^`]+)`", r"\1", message)


#: The service's list of every flow, and what the page says instead (serve/ui/api.js's LIST_HINTS).
FLOW_LIST = (r" \(built-in: [^()]*; saved: [^()]*\)$",
             " (the Flows tab lists the flows: choose one from the list again)")


def page_error(status: int, error: dict) -> str:
    """An API error as the page shows it: the field it names, then its message without that field again at its start
    ("index: ", "field 'flow': ", "step 'fused', field 'steps.fused.op': ", "step 'a', operator 'rerank.api', field
    'steps.a.params.url': ", or "field 'params.filter'" of step 'bm25' for steps.bm25.params.filter; also after a
    leading clause, "the flow was not run: "), its pointers to the API's routes said as the page's tabs, its list of
    flows as the Flows tab."""
    message, param = page_text(error["message"]), error.get("param")
    for route, tab in {**SETTING_HINTS, **ROUTE_HINTS}.items():
        message = message.replace(route, tab)
    message = re.sub(*FLOW_LIST, message)
    if not param:
        return f"HTTP {status}: {message}"
    message = message.removeprefix(f"{param}: ")
    in_step = re.fullmatch(r"steps\.([^.]+)\.(.+)", param)  # also as its step's operator names it: 'params.filter'
    own = rf"|step '{re.escape(in_step[1])}', (?:operator '[^']*', )?field '{re.escape(in_step[2])}'" if in_step else ""
    said = rf"(^|: )(?:(?:step '[^']*', )?(?:operator '[^']*', )?field '{re.escape(param)}'{own}): "
    message = re.sub(said, r"\1", message, count=1)  # at the start, or after the clause that leads it
    if in_step := re.fullmatch(r"steps\.([^.]+)\.params\.(.+)", param):  # a step's param: its step and name
        return f"HTTP {status} (step '{in_step[1]}', param '{in_step[2]}'): {message}"
    return f"HTTP {status} (field: {param}): {message}"


def page_reason(reason: str) -> str:
    """Why the service cannot run a flow or model (GET /flows' ``status``, GET /v1/models' ``reason``) as the page says
    it: a step's param as "step 'x', param 'index'", not the API's "step 'x', field 'steps.x.params.index'", and its
    pointers to its routes and its list of flows as the page's tabs, and no "so nothing was run" (a listed flow was
    not run; serve/ui/api.js's inPageReason); its `backticks` left out (<code> in the page, stripped in a tooltip)."""
    reason = page_text(reason)
    reason = re.sub(r"^step '([^']*)', (?:operator '[^']*', )?field 'steps\.\1\.params\.([^']+)': ",
                    r"step '\1', param '\2': ", reason).replace(", so nothing was run: ", ": ")
    for route, tab in {**SETTING_HINTS, **ROUTE_HINTS}.items():
        reason = reason.replace(route, tab)
    return re.sub(*FLOW_LIST, reason)


def code_parts(message: str) -> list[str]:
    """What a message's `backticks` hold: the page's <code> elements where it shows the message as HTML."""
    return re.findall(r"`([^`]+)`", message)


def searched_line(label: str, text: str) -> str:
    """A chat follow-up's search as its turn shows it ("searched for: ...", "asked as: ..."; serve/ui/views.js
    searchedLine): over 200 characters, the first 200, an ellipsis and a "more" button."""
    return f"{label}: {text}" if len(text) <= 200 else f"{label}: {text[:200]}… more"


def fill_search(driver, flow: str, queries: str, top_k: str) -> None:
    Select(by_id(driver, "flow")).select_by_value(flow)
    for element_id, value in (("queries", queries), ("top-k", top_k)):
        field = by_id(driver, element_id)
        field.clear()
        field.send_keys(value)


def shown_results(driver) -> list[tuple[str, list[str]]]:
    """Per query article: its heading and the docno column of its hits table."""
    shown = driver.execute_script(SHOWN_TEXT + SHOWN_RESULTS)  # one command, as cell_texts
    return [(heading, docnos) for heading, docnos in shown]


SHOWN_RESULTS = """return [...document.querySelectorAll('#results article.result')].map((article) => {
  const text = shownText;
  const column = [...article.querySelectorAll('table.hits th')].map(text).indexOf('docno');
  if (column < 0) throw new Error('a hits table without a docno column');
  return [text(article.querySelector('h2')),
          [...article.querySelectorAll('table.hits tbody tr')].map((row) => text(row.querySelectorAll('td')[column]))];
});"""


def set_text(driver, element_id: str, text: str) -> None:
    """Replace a field's text as typing would, without typing a whole JSON spec key by key."""
    field = by_id(driver, element_id)
    driver.execute_script("arguments[0].value = arguments[1]", field, text)


def follow_enqueued(driver) -> str:
    """Run as a task from the filled search form, followed under Tasks until it ends; the task's id."""
    by_id(driver, "enqueue-button").click()
    wait(driver, lambda d: by_id(d, "tab-tasks").is_displayed())
    heading = wait(driver, lambda d: next((h.text for h in d.find_elements(By.CSS_SELECTOR, "#task-detail h2")
                                           if h.text.endswith(": finished")), None), seconds=300)
    return heading.removeprefix("task ").removesuffix(": finished")


def task_to_ask(driver, service, query: str = QUERY) -> str:
    """The page opened, ``query`` run as a bm25 task, and the task's id once its question box shows (it finished)."""
    open_page(driver, service)
    fill_search(driver, "bm25", query, "5")
    by_id(driver, "enqueue-button").click()
    wait(driver, lambda d: by_id(d, "task-chat-form").is_displayed(), seconds=120)
    return by_id(driver, "task-chat-form").get_attribute("data-task")


def chat_with(driver, model: str) -> None:
    """The Chat tab, with ``model`` (a language model or a flow that answers) chosen once it is listed."""
    driver.find_element(By.CSS_SELECTOR, 'nav button[data-tab="chat"]').click()
    wait(driver, lambda d: model in option_values(d, "chat-model"))
    Select(by_id(driver, "chat-model")).select_by_value(model)


def conversation_above_the_box(driver, log: str, box: str) -> bool:
    """Whether the conversation ``log`` comes before the message field ``box``, in the page and on screen."""
    return driver.execute_script("""const log = document.getElementById(arguments[0]);
        const box = document.getElementById(arguments[1]);
        return Boolean(log.compareDocumentPosition(box) & Node.DOCUMENT_POSITION_FOLLOWING)
            && log.getBoundingClientRect().bottom <= box.getBoundingClientRect().top;""", log, box)


@contextlib.contextmanager
def rag_cut_short(ui_app, prefix: str):
    """A saved copy of ``rag`` whose answer stops after 8 tokens (a long answer cut), its name; deleted after."""
    spec = ui_app.api("GET", "/flows/rag").json()
    spec["steps"]["answer"]["params"] = {"model": "local", "max_tokens": 8}
    name = prefix + secrets.token_hex(3)
    assert ui_app.api("PUT", f"/flows/{name}", spec).status_code == 201
    try:
        yield name
    finally:
        ui_app.api("DELETE", f"/flows/{name}")


def added_index(service, name: str) -> None:
    """An index of this key with one document, made through the API (its ingestion task followed to the end)."""
    document = {"id": "note", "title": "Note", "text": "Honey bees keep hives."}
    queued = service.api("POST", f"/v1/indices/{name}/documents", {"documents": [document]}).json()
    wait(None, lambda _: service.api("GET", f"/task/progress/{queued['task_id']}").json()["has_finished"], 120)
