"""The web UI's error line: the field an error names said once, and a flow spec the service refused marked on its
box. Same service and browser as the other test_web_ui_*.py modules (package fixtures)."""

from __future__ import annotations

import dataclasses
import json
import secrets

import pytest
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from tests.ui.browser import (
    QUERY, added_index, by_id, click, error_text, fill_search, flow_names, open_page, page_error, page_reason, set_text,
    wait,
)

pytestmark = [pytest.mark.ray, pytest.mark.integration]


def refused_search(browser, ui_app, index: str):
    """A bm25 search of ``index`` from the page: the error the page shows, and the service's answer to the same."""
    open_page(browser, ui_app)
    fill_search(browser, "bm25", QUERY, "3")
    set_text(browser, "index", index)
    by_id(browser, "search-button").click()
    shown = wait(browser, lambda d: error_text(d))
    return shown, ui_app.api("POST", "/v1/search", {"flow": "bm25", "query": QUERY, "top_k": 3, "index": index})


def test_an_errors_field_is_said_once_and_a_refused_spec_is_marked_aria_invalid_until_edited(browser, ui_app):
    shown, refused = refused_search(browser, ui_app, "../../etc")
    error = refused.json()["error"]
    assert refused.status_code == 422 and error["param"] == "index" and error["message"].startswith("index: index ")
    assert shown == page_error(422, error)
    # the service's setting, named for whoever runs it, is not said to a page user
    assert "is outside the folders this service reads indices from (args.service.index_roots); " in error["message"]
    assert shown == ("HTTP 422 (field: index): index '../../etc' is outside the folders this service reads indices "
                     "from; name an index under one of them")

    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="flows"]').click()
    bad = {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 5}},
                     "fused": {"op": "fuse.nonexistent", "inputs": ["bm25"]}}}
    set_text(browser, "flow-name", "errors_once")
    set_text(browser, "flow-spec", json.dumps(bad))
    by_id(browser, "flow-save").click()
    shown = wait(browser, lambda d: error_text(d))
    error = ui_app.api("PUT", "/flows/errors_once", bad).json()["error"]
    assert error["param"] == "steps.fused.op" and error["message"].startswith("step 'fused', field 'steps.fused.op': ")
    assert shown == "HTTP 422 (field: steps.fused.op): " + error["message"].split(": ", 1)[1]
    spec = by_id(browser, "flow-spec")
    assert browser.switch_to.active_element == spec
    assert spec.get_attribute("aria-invalid") == "true" and spec.get_attribute("aria-describedby") == "error"
    spec.send_keys(" ")  # edited: no longer the spec refused
    assert spec.get_attribute("aria-invalid") is None and spec.get_attribute("aria-describedby") is None

    # a step's param of the wrong kind: the step, the param and the value, not pydantic's "Input should be a valid
    # integer, unable to parse string as an integer" after "(field: steps.bm25.params.k)"
    set_text(browser, "flow-spec", json.dumps({"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": "abc"}}}}))
    by_id(browser, "flow-save").click()
    shown = wait(browser, lambda d: error_text(d))
    assert shown == "HTTP 422 (step 'bm25', param 'k'): must be a whole number (got \"abc\")"


def test_an_index_that_does_not_exist_is_said_with_the_tab_that_lists_the_indices_not_an_api_route(browser, ui_app):
    """The service's 422 points any client to ``GET /v1/indices``; a page user has the Indices tab, not a route."""
    shown, refused = refused_search(browser, ui_app, "no_such_index")
    assert refused.status_code == 422 and "(GET /v1/indices lists the indices)" in refused.json()["error"]["message"]
    assert shown == "HTTP 422 (field: index): index 'no_such_index' does not exist (the Indices tab lists the indices)"
    assert "GET /" not in shown and browser.switch_to.active_element == by_id(browser, "index")


def test_an_error_of_a_form_far_down_the_page_is_in_view_beside_the_field_it_names(browser, ui_app):
    """Delete documents, under the indices and the Add form: its refusal was drawn at the page's top, scrolled out of
    sight, so the button seemed to do nothing."""
    open_page(browser, ui_app)
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": 1280, "height": 600, "deviceScaleFactor": 1, "mobile": False})
    try:
        browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="indices"]').click()
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#index-table tbody tr"))
        set_text(browser, "delete-docs-index", "any_index")
        set_text(browser, "delete-docs-ids", " ")  # no ids: refused in the page
        button = by_id(browser, "delete-docs-button")
        browser.execute_script("arguments[0].scrollIntoView({block: 'end'})", button)
        button.click()
        assert wait(browser, lambda d: error_text(d)).startswith("enter the ids of the documents to delete")
        seen = browser.execute_script("""const box = document.getElementById('error').getBoundingClientRect();
            const field = document.activeElement.getBoundingClientRect();
            return {scrolled: window.scrollY, error: [box.top, box.bottom], field: [field.top, field.bottom],
                    height: window.innerHeight, focused: document.activeElement.id};""")
        assert seen["scrolled"] > 0 and seen["focused"] == "delete-docs-ids", seen  # far down, on the field
        assert 0 <= seen["error"][0] and seen["error"][1] <= seen["height"], seen  # the error in view
        assert seen["error"][1] <= seen["field"][0] and seen["field"][1] <= seen["height"], seen  # the field too
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_a_flow_deleted_since_the_list_came_and_a_refused_url_are_said_without_the_services_internal_words(
        browser, ui_app):
    """A saved flow chosen and deleted meanwhile (another tab) read "field 'flow': no flow named 'x' (built-in:
    answer_only, bm25, ... 26 names; saved: none)", and a spec's refused URL "step 'a', operator 'rerank.api', field
    'steps.a.params.url': ...", each after the page's own "(field: ...)"."""
    name = "gone_" + secrets.token_hex(3)
    assert ui_app.api("PUT", f"/flows/{name}", {"steps": {"b": {"op": "retrieve.bm25"}}}).status_code == 201
    open_page(browser, ui_app)
    wait(browser, lambda d: name in flow_names(d))
    Select(by_id(browser, "flow")).select_by_value(name)
    assert ui_app.api("DELETE", f"/flows/{name}").status_code == 200
    set_text(browser, "queries", QUERY)
    by_id(browser, "search-button").click()
    shown = wait(browser, lambda d: error_text(d))
    error = ui_app.api("POST", "/v1/search", {"flow": name, "query": QUERY}).json()["error"]
    assert error["param"] == "flow" and error["message"].startswith(f"field 'flow': no flow named '{name}' (built-in: ")
    assert shown == f"HTTP 422 (field: flow): no flow named '{name}' (the Flows tab lists the flows: choose one " \
                    "from the list again)" == page_error(422, error)

    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="flows"]').click()
    spec = {"steps": {"b": {"op": "retrieve.bm25"},
                      "a": {"op": "rerank.api", "inputs": ["b"], "params": {"url": "http://169.254.169.254/"}}}}
    set_text(browser, "flow-name", name)
    set_text(browser, "flow-spec", json.dumps(spec))
    by_id(browser, "flow-save").click()
    shown = wait(browser, lambda d: error_text(d))
    error = ui_app.api("PUT", f"/flows/{name}", spec).json()["error"]
    assert error["message"].startswith("step 'a', operator 'rerank.api', field 'steps.a.params.url': 169.254.169.254 ")
    assert shown.startswith("HTTP 422 (step 'a', param 'url'): 169.254.169.254 is ")
    assert shown == page_error(422, error)

    # A proxy's error page in front of the service (nginx's 502) was shown as its markup, tags and all; the page's
    # own reading of an answer's body (this app's Serve answers no request with HTML: called on such a body here).
    nginx = ("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>"
             "</center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
    said = browser.execute_script("return [describe(502, arguments[0]), describe(503, ''), "
                                  "describe(400, arguments[1])]", nginx, "Invalid HTTP request received.")
    assert said == ["HTTP 502: 502 Bad Gateway", "HTTP 503: (an empty answer)",
                    "HTTP 400: Invalid HTTP request received."]


def test_another_keys_index_is_refused_with_where_its_owner_shares_it_in_the_page_not_an_api_call(browser, ui_app):
    """The 403 told a page's user to share it with 'PATCH /v1/indices/{name} and {"shared": true}'."""
    name = "theirs_" + secrets.token_hex(3)
    added_index(dataclasses.replace(ui_app, key=ui_app.other_key), name)
    shown, refused = refused_search(browser, ui_app, name)
    error = refused.json()["error"]
    assert (refused.status_code, error["code"]) == (403, "index_not_shared")
    assert 'PATCH /v1/indices/{name} and {"shared": true}' in error["message"]
    assert shown == f"HTTP 403 (field: index): index '{name}' belongs to another key, which has not shared it (its " \
                    "owner shares it with the share button of the Indices tab)" == page_error(403, error)


@pytest.fixture
def ollama_down(ui_home):
    """An alias of the app's models file (its $TESSERA_HOME's, which its replica reads) for an Ollama model on a port
    nothing listens on: ``gemma2`` was a 503 only while no Ollama ran here. An app that read another models file
    would refuse the alias (422 model_not_allowed), not ask Ollama."""
    from operators.llm.testing import closed_port

    models = ui_home / "models.yaml"
    models.write_text(f"ollama_down: {{model: ollama_chat/gemma2, api_base: 'http://127.0.0.1:{closed_port()}'}}\n")
    yield "ollama_down"
    models.unlink()


def test_a_step_field_said_inside_the_message_is_said_once_in_the_pages_words(browser, ui_app, ollama_down):
    """A flow whose answer step's model is on an Ollama server that does not answer was a 503 without the field,
    "HTTP 503: the flow was not run: step 'answer', field 'steps.answer.params.model': ..."; a filter's column the
    index lacks named it as its operator does, "HTTP 422 (step 'bm25', param 'filter'): step 'bm25', operator
    'retrieve.bm25', field 'params.filter': filter column(s) ['TITLE'] not found ..."."""
    tag = secrets.token_hex(3)
    bm25 = {"op": "retrieve.bm25", "params": {"k": 3}}
    flows = {f"ollama_{tag}": {"bm25": bm25, "context": {"op": "generate.context"},
                               "answer": {"op": "generate.answer", "params": {"model": ollama_down}}},
             f"case_{tag}": {"bm25": {**bm25, "params": {"k": 3, "filter": {"field": "TITLE", "eq": "x"}}}}}
    for name, steps in flows.items():
        assert ui_app.api("PUT", f"/flows/{name}", {"steps": steps}).status_code == 201
    open_page(browser, ui_app)
    wait(browser, lambda d: set(flows) <= set(flow_names(d)))
    shown = {}
    for name in flows:
        Select(by_id(browser, "flow")).select_by_value(name)
        set_text(browser, "queries", QUERY)
        by_id(browser, "search-button").click()
        shown[name] = wait(browser, lambda d: error_text(d))
        refused = ui_app.api("POST", "/v1/search", {"flow": name, "query": QUERY})
        assert shown[name] == page_error(refused.status_code, refused.json()["error"])
        assert "field 'steps." not in shown[name] and "field 'params." not in shown[name], shown[name]
    assert shown[f"ollama_{tag}"].startswith("HTTP 503 (step 'answer', param 'model'): the flow was not run: model "
                                             "'ollama_down' cannot be reached: ")
    assert shown[f"case_{tag}"].startswith("HTTP 422 (step 'bm25', param 'filter'): filter column(s) ['TITLE'] not "
                                           "found ('TITLE': did you mean 'title'?)")
    for name in flows:
        ui_app.api("DELETE", f"/flows/{name}")


def test_what_the_keyboard_moves_to_is_scrolled_clear_of_the_error_line_not_under_it(browser, ui_app):
    """The error line stays at the window's top (sticky) over what scrolls under it: Shift+Tab up a long list of
    results scrolled each docno and "more" button to the window's top edge, where the error line hid it."""
    open_page(browser, ui_app)
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": 1280, "height": 600, "deviceScaleFactor": 1, "mobile": False})
    try:
        fill_search(browser, "bm25", QUERY, "30")
        by_id(browser, "search-button").click()
        wait(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results table.hits tbody tr")) == 30)
        set_text(browser, "index", "no_such_index")
        by_id(browser, "enqueue-button").click()  # refused, the results of the search kept under the error line
        assert wait(browser, lambda d: error_text(d)).startswith("HTTP 422 (field: index): ")
        last = browser.find_elements(By.CSS_SELECTOR, "#results table.hits button")[-1]
        browser.execute_script("arguments[0].focus()", last)  # the page scrolled down to the last hit
        bottom = browser.execute_script("return window.scrollY")
        hidden = []
        for _ in range(40):  # up the hits by keyboard, the page scrolled up as each goes out of view at its top
            ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()
            seen = browser.execute_script("""const focused = document.activeElement.getBoundingClientRect();
                return [document.activeElement.textContent, focused.top, focused.bottom,
                        document.getElementById('error').getBoundingClientRect().bottom];""")
            if seen[1] < seen[3]:  # its top under the error line's bottom: covered, wholly or in part
                hidden.append(seen)
        assert 0 < browser.execute_script("return window.scrollY") < bottom  # scrolled up as the focus went up
        assert hidden == []
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        open_page(browser, ui_app)  # the error line gone


def test_why_a_saved_flow_cannot_run_is_said_in_the_pages_words_not_the_apis(browser, ui_app):
    """A saved flow whose step names an index that is not there: the Flows tab said "cannot run here: step 'b',
    field 'steps.b.params.index': index '...' does not exist (GET /v1/indices lists the indices)", the API's path to
    the param and its route, where a refusal of the same says "(step 'b', param 'index')" and the Indices tab."""
    name = "noindex_" + secrets.token_hex(3)
    spec = {"steps": {"b": {"op": "retrieve.bm25", "params": {"index": "no_such_index"}}}}
    assert ui_app.api("PUT", f"/flows/{name}", spec).status_code == 201
    try:
        status = ui_app.api("GET", "/flows").json()["status"][name]
        assert not status["runnable"]
        assert status["reason"] == "step 'b', field 'steps.b.params.index': index 'no_such_index' does not exist " \
                                   "(GET /v1/indices lists the indices)"
        said = "step 'b', param 'index': index 'no_such_index' does not exist (the Indices tab lists the indices)"
        open_page(browser, ui_app)
        wait(browser, lambda d: name in flow_names(d))
        assert browser.find_element(By.CSS_SELECTOR, f'#flow option[value="{name}"]').get_attribute("title") == said
        browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="flows"]').click()
        click(browser, f'//ul[@id="flow-list"]//button[text()="{name}"]')
        wait(browser, lambda d: by_id(d, "flow-status").text == f"cannot run here: {said}")
        by_id(browser, "flow-use").click()
        assert wait(browser, lambda d: error_text(d)) == f"'{name}' cannot run on this service: {said}"
    finally:
        ui_app.api("DELETE", f"/flows/{name}")


def test_why_a_listed_flow_cannot_run_does_not_say_nothing_was_run(browser, ui_app):
    """GET /flows' reason is the refusal a run would get ("... are not on this machine, so nothing was run: ..."):
    under the Search form, for a flow only listed, the page says why without "so nothing was run"."""
    status = ui_app.api("GET", "/flows").json()["status"]
    off = {name: s["reason"] for name, s in status.items() if not s["runnable"] and "so nothing was run" in s["reason"]}
    assert "hybrid_ce" in off  # its cross-encoder is not trained here
    open_page(browser, ui_app)
    shown = wait(browser, lambda d: {li.get_attribute("data-flow"): li.get_attribute("textContent")
                                     for li in d.find_elements(By.CSS_SELECTOR, "#flows-off li")})
    for name, reason in off.items():
        assert shown[name] == f"{name}: {page_reason(reason)}"
        assert "nothing was run" not in shown[name] and "model(s) needed are not on this machine: " in shown[name]
