"""The Flows tab keeps what is typed in its editor: opening another flow over unsaved changes of the spec asks first
(they were replaced without a word), and *Search with it*, which runs the saved flow, refuses while the editor holds
changes not saved, saying so on the spec (it ran the saved flow without a word: the user believed the edit was
being tried); and leaving the page asks first while a spec edit is unsaved, or an upload is being sent.
docs/serving.md, the web UI's Flows row."""

from __future__ import annotations

import json
import secrets

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.ui.browser import by_id, click, dialog, error_text, open_page, set_text, wait

pytestmark = [pytest.mark.ray, pytest.mark.integration]


def test_unsaved_changes_are_kept_until_confirmed_and_are_not_searched_with_the_saved_flow(browser, ui_app):
    open_page(browser, ui_app)
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="flows"]').click()
    click(browser, '//ul[@id="flow-list"]//button[text()="bm25"]')
    wait(browser, lambda d: '"retrieve.bm25"' in by_id(d, "flow-spec").get_attribute("value"))
    spec = json.loads(by_id(browser, "flow-spec").get_attribute("value"))
    set_text(browser, "flow-spec", json.dumps(spec))  # the same spec laid out otherwise: nothing is asked
    click(browser, '//ul[@id="flow-list"]//button[text()="bm25"]')
    wait(browser, lambda d: by_id(d, "flow-spec").get_attribute("value") != json.dumps(spec))  # opened again
    spec["steps"]["bm25"]["params"]["k"] = 9
    edited = json.dumps(spec, indent=1)
    set_text(browser, "flow-spec", edited)

    click(browser, '//ul[@id="flow-list"]//button[text()="hybrid"]')
    assert dialog(browser).text == "Discard the unsaved changes to the spec of 'bm25' and open 'hybrid'?"
    dialog(browser).dismiss()  # kept
    assert [by_id(browser, f).get_attribute("value") for f in ("flow-name", "flow-spec")] == ["bm25", edited]

    by_id(browser, "flow-use").click()  # the saved bm25 is not run in the edit's place
    wait(browser, lambda d: error_text(d) == "the spec in the editor has unsaved changes (field: spec): press Save "
         "first; Search with it runs the saved flow 'bm25', not the editor's text")
    assert by_id(browser, "tab-flows").is_displayed() and not by_id(browser, "tab-search").is_displayed()
    assert wait(browser, lambda d: d.switch_to.active_element.get_attribute("id") == "flow-spec")
    assert by_id(browser, "flow-spec").get_attribute("aria-invalid") == "true"

    click(browser, '//ul[@id="flow-list"]//button[text()="hybrid"]')
    dialog(browser).accept()  # discarded: the other flow opened
    wait(browser, lambda d: by_id(d, "flow-name").get_attribute("value") == "hybrid")
    assert json.loads(by_id(browser, "flow-spec").get_attribute("value")) == ui_app.api("GET", "/flows/hybrid").json()
    by_id(browser, "flow-use").click()  # nothing unsaved: the Search tab with the flow chosen
    wait(browser, lambda d: by_id(d, "tab-search").is_displayed())
    assert Select(by_id(browser, "flow")).first_selected_option.get_attribute("value") == "hybrid"


#: Whether leaving the page now would be asked about: a ``beforeunload`` event sent to the page, as the browser sends
#: one before a reload or a closed tab, and whether the page's handler cancelled it (the browser then asks; headless
#: Chromium under ChromeDriver shows no such dialog, so the event is sent here, to the page's real handler).
LEAVING_ASKS = """(() => {
    const leaving = new Event('beforeunload', {cancelable: true});
    window.dispatchEvent(leaving);
    return leaving.defaultPrevented;
})()"""


def leaving_asks(driver) -> bool:
    return driver.execute_script("return " + LEAVING_ASKS)


def test_leaving_the_page_asks_first_while_a_spec_edit_is_unsaved_or_an_upload_is_being_sent(browser, ui_app):
    """A reload or a closed tab lost a spec edited and not saved, and stopped an upload whose next parts the page
    sends, without a word; both now have the browser ask first, and nothing else does."""
    open_page(browser, ui_app)
    assert leaving_asks(browser) is False  # nothing to lose
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="flows"]').click()
    click(browser, '//ul[@id="flow-list"]//button[text()="bm25"]')
    wait(browser, lambda d: '"retrieve.bm25"' in by_id(d, "flow-spec").get_attribute("value"))
    assert leaving_asks(browser) is False  # opened, not changed
    spec = json.loads(by_id(browser, "flow-spec").get_attribute("value"))
    spec["steps"]["bm25"]["params"]["k"] = 9
    set_text(browser, "flow-spec", json.dumps(spec))
    assert leaving_asks(browser) is True
    click(browser, '//ul[@id="flow-list"]//button[text()="hybrid"]')
    dialog(browser).accept()  # discarded: nothing unsaved any more
    wait(browser, lambda d: by_id(d, "flow-name").get_attribute("value") == "hybrid")
    assert leaving_asks(browser) is False

    name = "leaving-" + secrets.token_hex(3)
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="indices"]').click()
    set_text(browser, "upload-index", name)
    set_text(browser, "upload-id", "note")
    set_text(browser, "upload-text", "Honey bees keep hives.")
    try:
        by_id(browser, "upload-button").click()
        # while its task is queued and followed (the button off), leaving would stop it: asked
        assert wait(browser, lambda d: d.execute_script(
            "return document.getElementById('upload-button').disabled && " + LEAVING_ASKS), seconds=60)
        wait(browser, lambda d: by_id(d, "upload-status").text.startswith("added 1 document(s)"), seconds=180)
        assert leaving_asks(browser) is False  # sent: nothing left to send
    finally:
        ui_app.api("DELETE", f"/v1/indices/{name}")
