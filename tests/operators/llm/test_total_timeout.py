"""A model call's limit in all (``total_timeout``), on the local fault server's ``trickle`` scenario: a reply that
takes ``delay`` seconds and never goes quiet for long, so the per-wait ``timeout`` never runs out. Before, such a
server held a call, a step and a chat's answer for as long as it went on."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from flows.executors.local import LocalExecutor
from flows.spec import FlowSpec
from operators.llm import LLMError, complete
from operators.llm.aliases import resolve
from operators.llm.testing import KEY_ENV
from operators.registry import create
from operators.testing import sample_results

#: What every message of a call past its limit of 1 s ends with.
SAYS = ("the call went on past its total_timeout of 1 s without finishing (the server kept it going), so it was "
        "abandoned; to wait longer, raise total_timeout (the step's param, or the alias's in models.yaml)")


@pytest.fixture
def trickle(fault_models):
    """The trickle server: a word or a byte every 0.1 s for 20 s (its per-wait timeout never runs out)."""
    fault_models.pace, fault_models.delay = 0.1, 20.0
    return fault_models


def left(server, count: int = 1) -> bool:
    """Whether the server saw ``count`` trickle clients go away (each closed its connection), waiting for it up to
    the server's ``delay``: the server finds out at its next write."""
    until = time.monotonic() + server.delay
    while server.left["trickle"] < count and time.monotonic() < until:
        time.sleep(0.05)
    return server.left["trickle"] == count


def threads() -> set[str]:
    """The names of this process's threads but the fault server's (one per request it answers)."""
    return {t.name for t in threading.enumerate() if "process_request" not in t.name}


@pytest.mark.parametrize("streamed", [False, True])
def test_a_call_the_server_keeps_going_is_abandoned_at_its_total_timeout(trickle, streamed):
    pieces: list[str] = []
    before = threads()
    with pytest.raises(LLMError) as err:
        complete("Which insects make honey?", model="fault-trickle", timeout=30, num_retries=2, total_timeout=1,
                 on_text=pieces.append if streamed else None)
    assert err.value.kind == "timeout" and err.value.message.endswith(SAYS), err.value.message
    assert err.value.message.startswith("model 'fault-trickle' (openai/fault-trickle at http://127.0.0.1:")
    assert left(trickle) and trickle.attempts["trickle"] == 1  # its connection closed, and not tried again
    new = {name for name in threads() - before if not name.startswith("asyncio_")}  # (its loop's pool: bounded)
    assert new <= {"tessera-llm-io"}, new  # (that one runs every call's I/O)


def test_an_aliass_total_timeout_is_the_default_and_the_default_is_a_few_timeouts(trickle, tmp_path, monkeypatch):
    from operators.llm.gateway import total_limit

    models = tmp_path / "capped.yaml"
    models.write_text(f"capped: {{model: openai/m, api_base: '{trickle.api_base('trickle')}', api_key_env: {KEY_ENV},"
                      " total_timeout: 1}\nplain: {model: openai/m, timeout: 30}\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    with pytest.raises(LLMError) as err:
        complete("Which insects make honey?", model="capped", timeout=30, num_retries=0)
    assert err.value.kind == "timeout" and err.value.message.endswith(SAYS), err.value.message
    assert left(trickle)
    # each of 3 attempts and a second, one more timeout, and litellm's backoffs (0.5, 1 and 2 s, each and its jitter)
    assert total_limit(resolve("plain"), None, None, None) == 31 * 3 + 30 + 3.5 + 3 * 0.75
    assert total_limit(resolve("plain"), 10, 0, None) == 11 + 10 and total_limit(resolve("capped"), 10, 0, None) == 1


@pytest.mark.parametrize("scenario, says, kind", [
    ("slow", "the server sent nothing for 0.2 s (the timeout)", "timeout"),
    ("refused", "connection refused: no server listens there", "connection"),
    ("unavailable", "ServiceUnavailableError: the fault server is unavailable on purpose", "api")])
def test_a_failure_through_litellms_retries_is_said_as_itself_not_as_the_default_total_timeout(fault_models, scenario,
                                                                                               says, kind):
    """With a short timeout, litellm's backoffs (0.5, 1, 2 s) outlasted the timeouts: the default total_timeout cut
    the call in them and said "the server kept it going", a connection refused and a 503 a timeout."""
    with pytest.raises(LLMError) as err:
        complete("Which insects make honey?", model=f"fault-{scenario}", timeout=0.2, num_retries=2)
    assert err.value.kind == kind and says in err.value.message, err.value.message
    assert fault_models.attempts[scenario] == (0 if scenario == "refused" else 3)  # (every attempt made)


@pytest.mark.parametrize("op, params, table", [
    ("generate.answer", {}, lambda: create("generate.context", {"max_context_length": 300})(sample_results(1, 2))),
    ("summarize.documents", {}, lambda: sample_results(1, 2)),
    ("rerank.llm_group", {"n": 2}, lambda: sample_results(1, 2)),
])
def test_a_step_whose_server_keeps_going_is_degraded_naming_its_total_timeout(trickle, op, params, table):
    step = create(op, {"model": "fault-trickle", "timeout": 30, "num_retries": 0, "total_timeout": 1, **params},
                  step_id="s")
    given = table()
    out = step(given)
    degraded = step.drain_metadata()["q1"]["degraded"]
    assert degraded["step"] == "s" and "timeout: model 'fault-trickle' (openai/fault-trickle at " in degraded["reason"]
    assert degraded["reason"].endswith(SAYS), degraded["reason"]
    assert out.select(given.column_names).slice(0, given.num_rows).equals(given)  # the rows as they came in
    assert step.drain_usage()["llm_failed"] >= 1


def test_a_chats_streamed_answer_stops_at_its_total_timeout(trickle):
    """A flow's chat answer streams through generate.answer: a server writing a word a second held the request."""
    from operators.generate.answer_stream import streaming_answers

    table = create("generate.context", {"max_context_length": 300})(sample_results(1, 2))
    answer = create("generate.answer", {"model": "fault-trickle", "timeout": 30, "num_retries": 0,
                                        "total_timeout": 1}, step_id="answer")
    with streaming_answers(lambda qid, text: None):
        out = answer(table)
    assert answer.drain_metadata()["q1"]["degraded"]["reason"].endswith(SAYS)
    assert out.select(table.column_names).equals(table) and left(trickle)
    assert [body.get("stream") for body in trickle.bodies] == [True]


def test_a_flows_chat_reply_says_the_call_passed_its_total_timeout(trickle):
    """Said in the reply a chat gets (the HTTP service's and ``tessera chat``'s)."""
    from serve.chat.chat_flows import _message

    spec = FlowSpec.parse({"name": "answers", "steps": {
        "context": {"op": "generate.context", "params": {"max_context_length": 300}},
        "answer": {"op": "generate.answer", "params": {"model": "fault-trickle", "timeout": 30, "num_retries": 0,
                                                       "total_timeout": 1}}}})
    reply = _message(LocalExecutor().run(spec, sample_results(1, 2)), "q1")
    assert reply["answered"] is False and reply["message"]["content"].endswith(SAYS + ").")


@pytest.mark.process
def test_a_processs_first_calls_print_nothing_of_litellms(fault_models):
    """A new process's first call imports litellm's async side (``whole_call.warm``), on the loop its calls run on:
    warmed on another, litellm's logging worker said "LoggingWorker: event loop changed; carried 1 pending ..." on
    stderr at the next call."""
    code = ("from operators.llm import complete\n"
            "for _ in range(2):\n"
            "    print(complete('Which insects make honey?', model='fault-ok', num_retries=0).text)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert done.returncode == 0 and done.stdout.count("Honey bees make honey") == 2, done.stderr
    assert "LiteLLM" not in done.stderr and "event loop" not in done.stderr, done.stderr


def test_total_timeout_is_not_part_of_a_steps_cache_identity(fault_models, tmp_path, monkeypatch):
    """A reply is the same however long the call could have taken (one past it is degraded, never stored): a step
    cached before the param came, or with another limit, is found again."""
    models = tmp_path / "capped.yaml"
    models.write_text("capped: {model: openai/m, api_base: 'http://127.0.0.1:9/v1', total_timeout: 5}\n"
                      "plain: {model: openai/m, api_base: 'http://127.0.0.1:9/v1'}\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    plain = create("summarize.documents", {"model": "plain"}).cache_identity()
    assert "total_timeout" not in plain
    assert create("summarize.documents", {"model": "plain", "total_timeout": 9}).cache_identity() == plain
    assert create("summarize.documents", {"model": "capped"}).cache_identity()["resolved_model"] == \
        plain["resolved_model"]
