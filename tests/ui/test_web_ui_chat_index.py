"""The Chat tab's index box with a language model chosen: the service answers a model with no index (a 422 for one),
and the page sent none while its box still showed the index typed, so the page seemed to ground a bare model's answer
on it. A second app beside the package's, with SmolLM2 served (the package's serves no language model)."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.ui.browser import by_id, chat_with, open_page, wait
from tests.ui.conftest import Service

pytestmark = [pytest.mark.ray, pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def llm_app(ui_app, sample_index):
    """The service with SmolLM2 served (alias ``local``), the same key, at ``/tessera-llm`` of the same Serve."""
    from ray import serve

    from serve.app import build_app
    from serve.service_settings import key_hash

    llms = [{"name": "smollm2", "threads": 1, "num_cpus": 0.25, "autoscaling": {"min_replicas": 1, "max_replicas": 1}}]
    store = ui_app.store_url.removesuffix(".db") + "-llm.db"
    args = {"llms": llms, "service": {"default_index": str(sample_index), "task_store": store,
                                      "api_keys": [{"id": "ui", "sha256": key_hash(ui_app.key)}]}}
    serve.run(build_app(args), name="ui-llm", route_prefix="/tessera-llm", logging_config={"log_level": "WARNING"})
    try:
        yield Service(ui_app.url.removesuffix("/tessera") + "/tessera-llm", ui_app.key, store)
    finally:
        serve.delete("ui-llm")


def index_box(browser) -> tuple[bool, str]:
    why = browser.find_elements(By.ID, "chat-index-why")  # (the page said nothing there before)
    return by_id(browser, "chat-index").is_enabled(), why[0].text if why else ""


def test_the_index_box_is_off_and_says_why_while_a_language_model_is_chosen(browser, llm_app):
    refused = llm_app.api("POST", "/v1/chat/completions", {"model": "smollm2", "index": "sample",
                                                           "messages": [{"role": "user", "content": "hi"}]})
    assert refused.status_code == 422 and refused.json()["error"]["param"] == "index"  # what the page must not send
    open_page(browser, llm_app)
    chat_with(browser, "rag")
    by_id(browser, "chat-index").send_keys("sample")
    assert index_box(browser) == (True, "")

    Select(by_id(browser, "chat-model")).select_by_value("smollm2")
    assert index_box(browser) == (False, "a model alone reads no index: choose a flow (rag) to answer from an "
                                         "index's documents")
    assert by_id(browser, "chat-index").get_attribute("value") == "sample"  # kept for a flow chosen again

    browser.refresh()  # the model kept for the reload: the box is off again once the list has come
    browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="chat"]').click()
    wait(browser, lambda d: Select(by_id(d, "chat-model")).first_selected_option.get_attribute("value") == "smollm2")
    assert wait(browser, lambda d: not index_box(d)[0])
    Select(by_id(browser, "chat-model")).select_by_value("rag")
    assert index_box(browser) == (True, "")
