"""query.contextualize: follow-up questions made to stand alone, from the conversation (history form, the model's
rewrite through the fault server and the embedded model, its fallback), and what it changes in real retrieval."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from operators import create
from operators.errors import OperatorError
from operators.testing import OperatorContract, sample_queries, sample_results

HONEY = [{"role": "user", "content": "Which insects make honey?"},
         {"role": "assistant", "content": "Honey bees make honey [1].\n\nSources:\n[1] Honey bee (wv00120#0)"}]


def with_conversation(table: pa.Table, conversation=HONEY) -> pa.Table:
    """``table`` with the conversation on its first query (the others have none)."""
    first = table.column("qid")[0].as_py()
    value = json.dumps(conversation)
    return table.append_column("messages", pa.array([value if q == first else None
                                                     for q in table.column("qid").to_pylist()], pa.string()))


class TestContextualizeContract(OperatorContract):
    operator_name = "query.contextualize"

    def make_input(self, n_queries: int = 3, per_query: int = 5):
        return with_conversation(sample_results(n_queries, per_query))


def test_history_puts_the_conversation_after_the_question():
    table = with_conversation(sample_queries(2))
    op = create("query.contextualize", {}, step_id="standalone")
    out = op(table)
    rows = out.to_pylist()
    follow = table.column("query")[0].as_py()
    # the Sources list and the [1] citations of Tessera's own answer are not what the turn was about
    assert rows[0]["query"] == f"{follow} (Which insects make honey?; Honey bees make honey.)"
    assert rows[0]["original_query"] == follow
    assert rows[1]["query"] == rows[1]["original_query"] == table.column("query")[1].as_py()  # no conversation
    assert op.drain_metadata() == {"q1": {"standalone_query": rows[0]["query"]}}


def test_turns_roles_and_the_question_given_inside_the_conversation():
    long_talk = [{"role": "user", "content": f"question {i}"} if i % 2 == 0 else
                 {"role": "assistant", "content": [{"type": "text", "text": f"answer {i}"}]} for i in range(6)]
    table = sample_queries(1)
    asked = table.column("query")[0].as_py()
    given = with_conversation(table, [*long_talk, {"role": "user", "content": "  " + asked}])
    out = create("query.contextualize", {"turns": 3})(given)
    assert out.column("query")[0].as_py() == f"{asked} (answer 3; question 4; answer 5)"
    out = create("query.contextualize", {"roles": ["assistant"], "turns": 1, "max_chars": 4})(given)
    assert out.column("query")[0].as_py() == f"{asked} (answ)"


def test_a_conversation_that_is_not_messages_names_the_query_and_column():
    table = sample_queries(1).append_column("messages", pa.array(["not json"]))
    with pytest.raises(OperatorError, match="query q1: 'messages' is text but not JSON"):
        create("query.contextualize", {})(table)
    table = sample_queries(1).append_column("talk", pa.array(['{"role": "user"}']))
    with pytest.raises(OperatorError, match="'talk' holds dict"):
        create("query.contextualize", {"messages_column": "talk"})(table)


@pytest.mark.parametrize("blank", ["", "  \n"])
def test_a_blank_messages_cell_is_a_first_turn_and_an_empty_question_gets_the_turns_alone(blank):
    """A table whose first turns leave the messages cell empty (a DataFrame's "") failed the step ("is text but not
    JSON"); an empty question's history form began with a space."""
    table = sample_queries(2).append_column("messages", pa.array([blank, json.dumps(HONEY)]))
    table = table.set_column(1, "query", pa.array(["which insects make honey", ""]))
    out = create("query.contextualize", {})(table)
    assert out.column("query").to_pylist() == ["which insects make honey",
                                               "(Which insects make honey?; Honey bees make honey.)"]


def test_the_history_form_needs_no_model_and_is_cached_at_any_temperature():
    # a model on a server that does not run here (Ollama's): a call to it would fail
    op = create("query.contextualize", {"model": "ollama_chat/nothing-here", "temperature": 0.7})
    assert op.cacheable and "resolved_model" not in op.cache_identity()
    assert op(with_conversation(sample_queries(1))).column("query")[0].as_py().endswith("make honey.)")


def test_the_model_rewrites_and_a_bad_rewrite_falls_back_to_the_history(fault_models):
    fault_models.reply = "Rewritten question: \"How do honey bees make honey?\"\nThat is all."
    table = with_conversation(sample_queries(2))
    op = create("query.contextualize", {"method": "llm", "model": "fault-ok"}, step_id="standalone")
    out = op(table)
    assert out.column("query").to_pylist()[0] == "How do honey bees make honey?"
    assert fault_models.attempts["ok"] == 1  # the query without a conversation needs no call
    prompt = fault_models.bodies[0]["messages"][-1]["content"]
    assert "User: Which insects make honey?\nAssistant: Honey bees make honey." in prompt
    meta = op.drain_metadata()["q1"]
    assert meta["standalone_query"] == "How do honey bees make honey?" and meta["usage"]["standalone"]["calls"] == 1

    fault_models.reply = "Bees"
    op = create("query.contextualize", {"method": "llm", "model": "fault-ok"}, step_id="standalone")
    out = op(table)
    assert out.column("query")[0].as_py().endswith("(Which insects make honey?; Honey bees make honey.)")
    assert "1 word(s)" in op.drain_metadata()["q1"]["degraded"]["reason"]
    fault_models.reply = table.column("query")[0].as_py().upper()  # the question again: no rewrite
    op = create("query.contextualize", {"method": "llm", "model": "fault-ok"}, step_id="standalone")
    assert op(table).column("query")[0].as_py().endswith("make honey.)")
    assert "adds no word" in op.drain_metadata()["q1"]["degraded"]["reason"]
    fault_models.reply = "Bees"
    with pytest.raises(OperatorError, match="1 word"):
        create("query.contextualize", {"method": "llm", "model": "fault-ok", "on_error": "error"})(table)


@pytest.mark.parametrize("scenario", ["error", "junk"])
def test_a_failed_call_degrades_to_the_history_form(fault_models, scenario):
    op = create("query.contextualize", {"method": "llm", "model": f"fault-{scenario}", "num_retries": 0},
                step_id="standalone")
    out = op(with_conversation(sample_queries(1)))
    assert out.column("query")[0].as_py().endswith("make honey.)")
    assert op.drain_metadata()["q1"]["degraded"]["step"] == "standalone"


@pytest.mark.integration
def test_a_follow_up_finds_what_it_refers_to_in_the_sample_index(sample_index):
    """Real retrieval: "how do they make it?" alone finds nothing about bees; with the conversation it does."""
    from flows.executors import make_executor
    from flows.spec import FlowSpec

    table = pa.table({"qid": ["1"], "query": ["How do they make it?"], "messages": [json.dumps(HONEY)]})
    titles = {}
    for name, steps in {"alone": {}, "with": {"standalone": {"op": "query.contextualize"}}}.items():
        spec = FlowSpec.parse({"name": name, "steps": {**steps, "bm25": {"op": "retrieve.bm25", "params": {
            "index": str(sample_index), "k": 5}}}})
        result = make_executor("local", keep_history=False).run(spec, table)
        titles[name] = result.table.column("title").to_pylist()
    assert not any("bee" in t.lower() or "honey" in t.lower() for t in titles["alone"])
    assert any("bee" in t.lower() or "honey" in t.lower() for t in titles["with"][:3])


@pytest.mark.slow
def test_the_embedded_model_rewrites_a_follow_up():
    op = create("query.contextualize", {"method": "llm", "model": "local", "max_tokens": 32}, step_id="standalone")
    table = pa.table({"qid": ["1"], "query": ["How do they make it?"], "messages": [json.dumps(HONEY)]})
    standalone = op(table).column("query")[0].as_py()
    meta = op.drain_metadata()["1"]  # the model's rewrite, or the history form when it made none
    assert "honey" in standalone.lower() or "bee" in standalone.lower(), (standalone, meta)
    assert meta["usage"]["standalone"]["calls"] == 1 and meta["standalone_query"] == standalone


def test_a_declined_reply_is_left_out_of_the_history():
    """After "The documents found do not answer this question." (generate.answer's no_answer), a follow-up's search
    was given those words: about answering, not the subject. The reply is left out; the question before it stays."""
    from operators.conversation import NO_ANSWER

    talk = [{"role": "user", "content": "Who designed the Eiffel Tower?"},
            {"role": "assistant", "content": "  the documents found do NOT answer  this question. "},
            *HONEY]
    table = with_conversation(sample_queries(1), talk)
    asked = table.column("query")[0].as_py()
    out = create("query.contextualize", {"turns": 4})(table)
    assert out.column("query")[0].as_py() == (f"{asked} (Who designed the Eiffel Tower?; Which insects make honey?; "
                                              "Honey bees make honey.)")
    kept = create("query.contextualize", {"turns": 4, "declined_replies": ["Nothing found."]})(table)
    # another flow's no_answer: this reply is an answer like any other
    assert f"; {NO_ANSWER.lower()};" in kept.column("query")[0].as_py().lower()


def test_the_services_reply_that_is_no_answer_is_left_out_of_the_history():
    """A Cohere client (``/v2/chat``) cannot tell "No answer could be written (...)" from an answer and sends it back:
    the follow-up was searched for with it. Left out as the declined replies are, with any sources under it."""
    talk = [{"role": "user", "content": "In which year did humans land on the Moon?"},
            {"role": "assistant", "content": "No answer could be written (the model repeated the prompt's example "
                                             "answer '1969', which no document holds).\n\nSources:\n[1] Moon (m1)"},
            *HONEY]
    table = with_conversation(sample_queries(1), talk)
    asked = table.column("query")[0].as_py()
    out = create("query.contextualize", {"turns": 4})(table)
    assert out.column("query")[0].as_py() == (f"{asked} (In which year did humans land on the Moon?; Which insects "
                                              "make honey?; Honey bees make honey.)")
