"""What ``POST /v1/chat/completions`` does with OpenAI's fields that ask for more than a text answer, sent by the
unmodified ``openai`` client (over the app in-process: its ``http_client`` is the app's TestClient): a field that
changes what the client waits for (tools, a JSON answer, log probabilities, a web search) is a 422 naming it and
saying it is not supported; one that asks for nothing these models change (``store``, ``metadata``,
``service_tier``, ``user``...) is accepted and not used. ``web_search_options`` was ignored: the client waited for
an answer from the web, with url citations, and got one from the model alone. The body and error handlers are the
service's; the route stands in for the Serve ingress's flow branch, over a real ``Service`` (no Ray: every request
here stops at the body's checks)."""

from __future__ import annotations

import openai
import pytest
from fastapi.testclient import TestClient

from tests.serve.conftest import chat_app


#: A conversation with no user message: past every field's check, the flow refuses it (param ``messages``).
NO_QUESTION = [{"role": "system", "content": "Be brief."}]


@pytest.fixture
def client(make_service) -> openai.OpenAI:
    make_service()
    return openai.OpenAI(base_url="http://testserver/v1", api_key="unused", http_client=TestClient(chat_app()),
                         max_retries=0)


@pytest.mark.parametrize("field, value", [
    ("tools", [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]),
    ("tool_choice", "required"),
    ("response_format", {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}}}),
    ("response_format", {"type": "json_object"}),
    ("logprobs", True), ("top_logprobs", 3),
    ("web_search_options", {"search_context_size": "low"}),
])
def test_a_field_that_changes_what_the_client_waits_for_is_refused_naming_it(client, field, value):
    with pytest.raises(openai.UnprocessableEntityError) as err:
        client.chat.completions.create(model="rag", messages=NO_QUESTION, **{field: value})
    error = err.value.body
    assert error["param"] == field and "supported" in error["message"], error


def test_fields_that_ask_for_nothing_these_models_change_are_accepted(client):
    with pytest.raises(openai.UnprocessableEntityError) as err:  # past every field's check, to the question's
        client.chat.completions.create(
            model="rag", messages=NO_QUESTION, store=True, metadata={"team": "bees"}, service_tier="flex", user="u1",
            parallel_tool_calls=False, reasoning_effort="low", prompt_cache_key="k1", safety_identifier="s1",
            verbosity="low", prediction={"type": "content", "content": "Bees."}, tool_choice="none", tools=[])
    assert err.value.body["param"] == "messages" and "no user message" in err.value.body["message"], err.value.body
