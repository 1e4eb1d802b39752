"""Language-model servers that misbehave, on the local fault server (operators.llm.testing): each failure is an
``LLMError`` that says what the server did (no key, no library internals), and every LLM step that meets one keeps
its rows, marks its query degraded with that reason, and does not cache it."""

from __future__ import annotations

import pytest

from flows.executors.local import LocalExecutor
from flows.spec import FlowSpec
from operators.llm import LLMError, complete
from operators.registry import create
from operators.testing import sample_queries, sample_results
from tests.text_checks import TRACEBACK

QUESTION = "Which insects make honey from the nectar of flowers, and how do they store it in the hive?"


@pytest.mark.parametrize("scenario, streamed, kind, says", [
    ("reset", False, "connection", "Connection error."),
    ("cut", True, "connection", "Stream ended before a finish_reason was received"),
    ("unavailable", False, "api", "ServiceUnavailableError: the fault server is unavailable on purpose"),
    ("malformed", False, "api", "the server's reply is not valid JSON"),
    ("html", False, "api", "the server's reply is not valid JSON, so no completion: "
                           "'<html><body><h1>Welcome</h1></body></html>'"),
    ("shapeless", False, "api", "the server's reply is not a completion: it has no choices (its keys: ['foo'])"),
    ("binary", False, "api", "the server's reply is not UTF-8 text"),
    ("binary", True, "api", "the server's reply is not UTF-8 text"),  # streamed, it was a 'connection' error
    ("nochoices", False, "api", "the server's reply has no choices"),
    # an error object in a 200 (OpenRouter's upstream failure) was "bad_request: BadRequestError: BadRequestError"
    ("failed200", False, "api", "the server's reply is an error, not a completion: the upstream provider is "
                                "overloaded"),
    # streamed, a body that is no stream of events was read as an empty reply ('', finish reason stop)
    ("html", True, "api", "the server's reply is not a stream of events (Content-Type: text/html), so no completion"),
    ("malformed", True, "api", "the server's reply is not a stream of events (Content-Type: application/json), so no "
                               "completion"),
    ("shapeless", True, "api", "the server's reply is not a stream of events (Content-Type: application/json), so no "
                               "completion"),
    ("huge", False, "api", "the reply is 1,000,000 characters, more than max_tokens=64 allows"),
    ("huge", True, "api", "the reply passed 4,096 characters, more than max_tokens=64 allows"),
    ("echo", False, "api", "the model sent the prompt back (an echo), not an answer"),
    ("echo", True, "api", "the model sent the prompt back (an echo), not an answer"),
    ("slow", False, "timeout", "the server sent nothing for 0.2 s (the timeout)"),
    # a reply the provider's filter stopped was the answer, a summary, a query
    ("filtered", False, "api", "the provider's content filter stopped the reply (finish reason content_filter), so it "
                               "is not an answer"),
    ("filtered", True, "api", "the provider's content filter stopped the reply (finish reason content_filter), so it "
                              "is not an answer"),
])
def test_a_misbehaving_server_is_an_error_that_says_what_it_did(fault_models, scenario, streamed, kind, says):
    pieces: list[str] = []
    # the short timeout for the slow server only (its reply comes after 5 s): on loaded cores a reset came after
    # 0.5 s and was a timeout
    timeout = 0.2 if scenario == "slow" else 30
    with pytest.raises(LLMError) as err:
        complete(QUESTION, model=f"fault-{scenario}", max_tokens=64, timeout=timeout, num_retries=0,
                 on_text=pieces.append if streamed else None)
    message = err.value.message
    assert err.value.kind == kind and message.endswith(says), message
    assert message.startswith(f"model 'fault-{scenario}' (openai/fault-{scenario} at http://127.0.0.1:")
    assert "sk-fault" not in message and "<class" not in message and "Received response" not in message
    assert "litellm" not in message.lower() and message.count("Error: ") + message.count("Exception - ") <= 1
    assert len("".join(pieces)) <= 64 * 64  # a huge stream is read no further than max_tokens allows


def test_the_exception_names_litellm_nests_are_left_out_of_the_message():
    """"InternalServerError: litellm.APIError: LiteLLM: ...": only the first of litellm's names was taken off."""
    import litellm

    from operators.llm.failures import failure_detail

    err = litellm.InternalServerError(message="litellm.APIError: LiteLLM: the provider sent something odd",
                                      llm_provider="openai", model="m")
    assert failure_detail(err) == "InternalServerError: the provider sent something odd"


#: Each LLM step (but retrieve.multi_hop, which needs an index: tests/operators/retrieve) and what it is given.
STEPS = {
    "summarize.documents": ({}, lambda: sample_results(1, 2)),
    "summarize.results": ({}, lambda: sample_results(1, 2)),
    "rerank.llm_tournament": ({"n": 3}, lambda: sample_results(1, 3)),
    "rerank.llm_group": ({"n": 3}, lambda: sample_results(1, 3)),
    "query.expand": ({"strategies": ["rephrase"]}, lambda: sample_queries(1)),
    "query.decompose": ({}, lambda: sample_queries(1)),
    "query.keywords": ({}, lambda: sample_queries(1)),
    "generate.answer": ({}, lambda: create("generate.context", {"max_context_length": 300})(sample_results(1, 2))),
}


@pytest.mark.parametrize("scenario, says", [("echo", "(an echo)"), ("huge", "more than max_tokens"),
                                           ("filtered", "content filter stopped the reply")])
@pytest.mark.parametrize("op", list(STEPS))
def test_every_llm_step_degrades_on_an_echo_a_megabyte_or_a_filtered_reply(fault_models, op, scenario, says):
    """Before, an echoed prompt was a summary, an answer, expansions and every tournament's first candidate, and a
    1 MB reply a summary or a keyword query."""
    params, table = STEPS[op]
    step = create(op, {"model": f"fault-{scenario}", "num_retries": 0, **params}, step_id="s")
    given = table()
    out = step(given)
    meta = step.drain_metadata()["q1"]
    assert says in meta["degraded"]["reason"] and meta["degraded"]["step"] == "s"
    assert out.num_rows >= given.num_rows and out.select(given.column_names).slice(0, given.num_rows).equals(given)
    assert len(str(meta)) + max(len(str(v)) for c in out.columns for v in c.to_pylist()) < 20_000
    assert step.drain_usage()["llm_failed"] >= 1


def test_an_answer_citing_a_document_that_is_not_there_is_kept_and_degraded(fault_models):
    fault_models.reply = "Honey bees make honey [1][9].\nSources: 1, 9"
    table = create("generate.context", {"max_context_length": 300})(sample_results(1, 3))
    answer = create("generate.answer", {"model": "fault-ok", "style": "sentences"}, step_id="answer")
    out = answer(table)
    meta = answer.drain_metadata()["q1"]
    assert meta["answer"] == "Honey bees make honey [1][9]." and meta["sources"] == [table.column("docno")[0].as_py()]
    assert meta["degraded"] == {"step": "answer", "reason": "the reply cites [9], but the context has 2 documents "
                                                            "(those citations have no source)"}
    assert table.column("context_index").to_pylist() == [1, 2, None]  # the third did not fit
    assert out.column("cited").to_pylist() == [True, False, False]


def summaries() -> FlowSpec:
    return FlowSpec.parse({"name": "sums", "steps": {"sum": {"op": "summarize.documents", "params": {
        "model": "fault-ok", "num_retries": 0}}}})


def test_a_megabyte_summary_is_not_cached_so_a_healthy_run_is_not_served_it(fault_models, cache):
    fault_models.reply = "word " * 200_000
    first = LocalExecutor(cache=cache).run(summaries(), sample_results(1, 1))
    assert "more than max_tokens" in first.metadata["q1"]["degraded"]["reason"]
    fault_models.reply = "Bees make honey."
    again = LocalExecutor(cache=cache).run(summaries(), sample_results(1, 1))
    assert again.table.column("summary").to_pylist() == ["Bees make honey."] and again.steps["sum"].hits == 0


def test_a_flows_chat_answer_says_why_there_is_none_in_words(fault_models):
    from serve.chat.chat_flows import _message

    spec = FlowSpec.parse({"name": "answers", "steps": {
        "context": {"op": "generate.context", "params": {"max_context_length": 300}},
        "answer": {"op": "generate.answer", "params": {"model": "fault-nochoices", "num_retries": 0}}}})
    result = LocalExecutor().run(spec, sample_results(1, 2))
    content = _message(result, "q1")["message"]["content"]
    assert content.startswith("No answer could be written (api: model 'fault-nochoices' (openai/fault-nochoices at ")
    assert content.endswith("): the server's reply has no choices).") and "'step'" not in content



def test_a_chats_streamed_answer_from_a_web_page_says_so_not_that_the_model_wrote_nothing(fault_models):
    """A proxy's login page came back to a chat (streamed) as "the model returned no usable text ('', finish reason
    stop)": litellm reads a body that is no stream of events as an empty reply, which blamed the model."""
    from operators.generate.answer_stream import streaming_answers

    table = create("generate.context", {"max_context_length": 300})(sample_results(1, 2))
    answer = create("generate.answer", {"model": "fault-html", "num_retries": 0}, step_id="answer")
    pieces: list[str] = []
    with streaming_answers(lambda qid, text: pieces.append(text)):
        out = answer(table)
    reason = answer.drain_metadata()["q1"]["degraded"]["reason"]
    assert reason.startswith("api: model 'fault-html' (openai/fault-html at http://127.0.0.1:"), reason
    assert reason.endswith("): the server's reply is not a stream of events (Content-Type: text/html), so no "
                           "completion"), reason
    assert out.select(table.column_names).equals(table) and pieces == []


@pytest.mark.parametrize("streamed", [False, True])
def test_a_server_that_quotes_the_key_in_its_error_does_not_put_it_in_the_message(fault_models, streamed):
    """A 401 saying "Incorrect API key provided: <the key>" (a proxy, a self-hosted server) was quoted whole in the
    error, so in a degraded query's reason, `tessera run`'s warning and a chat's "No answer could be written"."""
    with pytest.raises(LLMError) as err:
        complete(QUESTION, model="fault-leaky", num_retries=0, on_text=(lambda _: None) if streamed else None)
    assert err.value.kind == "auth" and "sk-fault-test" not in str(err.value), err.value.message
    assert err.value.message.endswith("AuthenticationError: Incorrect API key provided: ***"), err.value.message


def test_a_provider_key_that_litellm_reads_itself_is_masked_too(fault_models, tmp_path, monkeypatch):
    """An `openai/` alias without api_key_env sends $OPENAI_API_KEY (litellm reads it): a server that quotes it back."""
    models = tmp_path / "own.yaml"
    models.write_text(f"leaky-own:\n  model: openai/m\n  api_base: {fault_models.api_base('leaky')}\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-own-provider-key")
    answer = create("generate.answer", {"model": "leaky-own", "num_retries": 0}, step_id="answer")
    out = answer(create("generate.context", {"max_context_length": 300})(sample_results(1, 2)))
    reason = answer.drain_metadata()["q1"]["degraded"]["reason"]
    assert reason.startswith("auth: model 'leaky-own' (openai/m at http://127.0.0.1:") and out.num_rows == 2
    assert "sk-own-provider-key" not in reason and reason.endswith("Incorrect API key provided: ***"), reason


def test_a_reply_not_in_openais_shape_says_which_part_without_a_traceback_or_warnings(fault_models):
    """`content` as a list of parts was "InternalServerError: Invalid response object Traceback (most recent call
    last):" (litellm's message, cut at its first line) after three lines of pydantic's serializer warnings."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        answer = create("generate.answer", {"model": "fault-parts", "num_retries": 0}, step_id="answer")
        table = create("generate.context", {"max_context_length": 300})(sample_results(1, 2))
        out = answer(table)
    reason = answer.drain_metadata()["q1"]["degraded"]["reason"]
    assert reason.endswith("): the server's reply is not a completion in OpenAI's shape (Message.content: Input "
                           "should be a valid string)"), reason
    assert TRACEBACK not in reason and out.select(table.column_names).equals(table)
    assert not [w for w in seen if "serializer" in str(w.message)], [str(w.message) for w in seen]


def test_a_completion_without_its_message_says_what_litellm_stopped_at():
    import litellm

    from operators.llm.failures import failure_detail

    text = ("OpenAIException - Invalid response object Traceback (most recent call last):\n  File \"x.py\", line 1, "
            "in f\n    message = choice['message']\nKeyError: 'message'\n\n\nreceived_args={'response_object': {}}")
    err = litellm.InternalServerError(message=text, llm_provider="openai", model="m")
    assert failure_detail(err) == "the server's reply is not a completion in OpenAI's shape (KeyError: 'message')"


def test_a_stream_without_a_choice_is_said_once_not_also_in_litellms_error_log(fault_models, capfd):
    """A stream of events that held no choice printed litellm's Router's "Fallback also failed:
    litellm.MidStreamFallbackError: ... No fallback was attempted" (three lines on stderr) before tessera chat's "no
    answer could be written (...)"."""
    with pytest.raises(LLMError) as err:
        complete(QUESTION, model="fault-eventless", num_retries=0, on_text=lambda _: None)
    assert err.value.kind == "connection" and "Stream ended before a finish_reason" in err.value.message
    assert "Fallback also failed" not in capfd.readouterr().err
