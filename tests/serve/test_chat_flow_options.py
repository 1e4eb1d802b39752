"""A chat with a flow hands its ``max_tokens`` and ``temperature`` to the flow's language-model steps; a value a step
refuses (``max_tokens`` above its bound) is a 422 naming the request's field, on OpenAI's and Cohere's bodies, not
``steps.standalone.params.max_tokens``, a field the client never sent. A real ``Service`` (no Ray, no HTTP): what
``prepare`` decides before anything runs."""

from __future__ import annotations

import pytest

from serve.chat import chat, chat_flows, cohere_chat
from flows.spec_errors import SpecError
from serve.http.errors import ApiError

QUESTION = [{"role": "user", "content": "Which insects make honey?"}]


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
def test_a_max_tokens_a_step_refuses_is_a_422_naming_the_request_field(make_service, field):
    make_service()
    spec = chat_flows.svc.current().flow_spec("rag", "local")
    request = chat.ChatRequest(model="rag", messages=QUESTION, **{field: 10**12})
    with pytest.raises(ApiError) as err:
        chat_flows.prepare_flow(spec, request, "local")
    assert (err.value.status, err.value.param) == (422, field), err.value.message
    assert "1000000000000" in err.value.message and "32768" in err.value.message


def test_a_max_tokens_past_what_json_carries_is_a_422_naming_the_request_field(make_service):
    """The service's check of a step's numbers (serve/runs/param_numbers.py) named
    ``steps.standalone.params.max_tokens``."""
    make_service()
    spec = chat_flows.svc.current().flow_spec("rag", "local")
    request = chat.ChatRequest(model="rag", messages=QUESTION, max_tokens=10**20)
    with pytest.raises(ApiError) as err:
        chat_flows.prepare_flow(spec, request, "local")
    assert (err.value.status, err.value.param, err.value.code) == (422, "max_tokens", "number_out_of_range")
    assert "steps." not in err.value.message.split(": ", 1)[0] and "2**53" in err.value.message, err.value.message


def test_cohere_max_tokens_is_named_as_sent(make_service):
    make_service()
    spec = chat_flows.svc.current().flow_spec("rag", "local")
    request = cohere_chat.CohereChatRequest(model="rag", messages=QUESTION, max_tokens=10**12).openai()
    with pytest.raises(ApiError) as err:
        chat_flows.prepare_flow(spec, request, "local")
    assert (err.value.status, err.value.param) == (422, "max_tokens"), err.value.message


def test_a_max_tokens_the_steps_allow_reaches_them(make_service):
    make_service()
    spec = chat_flows.svc.current().flow_spec("rag", "local")
    prepared, _ = chat_flows.prepare_flow(spec, chat.ChatRequest(model="rag", messages=QUESTION, max_tokens=7),
                                          "local")
    assert prepared.spec.steps["answer"].params["max_tokens"] == 7


def test_a_max_tokens_goes_only_to_the_steps_that_ask_a_model(make_service):
    """``rag``'s ``standalone`` (query.contextualize, ``method: history``) has a ``max_tokens`` but asks no model: a
    value over its bound was refused in its name ("the flow's step 'standalone' refuses 40000"), not the answer's."""
    make_service()
    spec = chat_flows.svc.current().flow_spec("rag", "local")
    with pytest.raises(ApiError) as err:
        chat_flows.prepare_flow(spec, chat.ChatRequest(model="rag", messages=QUESTION, max_tokens=40000), "local")
    assert "step 'answer' refuses 40000" in err.value.message, err.value.message
    prepared, _ = chat_flows.prepare_flow(spec, chat.ChatRequest(model="rag", messages=QUESTION, max_tokens=7,
                                                                 temperature=0.5), "local")
    assert "max_tokens" not in prepared.spec.steps["standalone"].params
    assert "temperature" not in prepared.spec.steps["standalone"].params
    assert prepared.spec.steps["answer"].params["temperature"] == 0.5


def test_a_contextualize_step_that_asks_a_model_gets_the_options(make_service):
    make_service()
    spec = chat_flows.svc.current().flow_spec("rag", "local")
    steps = {**spec.steps, "standalone": spec.steps["standalone"].model_copy(update={"params": {"method": "llm"}})}
    asking = spec.model_copy(update={"steps": steps})
    given = chat_flows._with_options(asking, chat.ChatRequest(model="rag", messages=QUESTION, max_tokens=7))
    assert given.steps["standalone"].params == {"method": "llm", "max_tokens": 7}


@pytest.mark.parametrize("max_tokens", [None, 7])
@pytest.mark.parametrize("option, value", [("max_tokens", "lots"), ("max_tokens", 0), ("temperature", "hot")])
def test_a_value_params_gave_a_step_is_refused_in_its_own_name_not_the_requests(make_service, option, value,
                                                                                max_tokens):
    """``params: {"answer.max_tokens": "lots"}`` was "max_tokens: the flow's step 'answer' refuses None" (param
    ``max_tokens``, a field the client did not send), or "refuses 7" when it sent max_tokens 7."""
    make_service()
    spec = chat_flows.svc.current().flow_spec("rag", "local")
    request = chat.ChatRequest(model="rag", messages=QUESTION, max_tokens=max_tokens,
                               params={f"answer.{option}": value})
    with pytest.raises((SpecError, ApiError)) as err:
        chat_flows.prepare_flow(spec, request, "local")
    where = err.value.field if isinstance(err.value, SpecError) else err.value.param
    assert where == f"steps.answer.params.{option}" and "refuses" not in str(err.value), str(err.value)


@pytest.mark.parametrize("body", ["openai", "cohere"])
def test_a_seed_reaches_the_steps_that_ask_a_model_on_either_body(make_service, body):
    """It was taken and dropped: a sampled answer could not be asked for again (the model's reply is in
    tests/serve/test_chat_flow_choices.py)."""
    make_service()
    spec = chat_flows.svc.current().flow_spec("rag", "local")
    request = chat.ChatRequest(model="rag", messages=QUESTION, seed=-7, temperature=0.8) if body == "openai" else \
        cohere_chat.CohereChatRequest(model="rag", messages=QUESTION, seed=-7, temperature=0.8).openai()
    prepared, _ = chat_flows.prepare_flow(spec, request, "local")
    assert (prepared.spec.steps["answer"].params["seed"], prepared.flow.operators["answer"].cacheable) == (-7, True)
    assert "seed" not in prepared.spec.steps["standalone"].params  # method: history asks no model
