"""retrieve.messages: a conversation's earlier answers become the first context rows of a follow-up question."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from operators.errors import OperatorError, ParamsError
from operators.registry import create
from operators.testing import OperatorContract, sample_results

CONVERSATION = [
    {"role": "system", "content": "You answer from the documents."},
    {"role": "user", "content": "Which insects make honey?"},
    {"role": "assistant", "content": "Honey bees make honey from the\n  nectar of flowers [1]."},
    {"role": "user", "content": "Do they pollinate?"},
    {"role": "assistant", "content": "Yes: bees pollinate\tmany crops."},
]
#: The same last answer as OpenAI content parts (only as JSON text: an Arrow column has one type per field).
PARTS = CONVERSATION[:4] + [{"role": "assistant", "content": [{"type": "text", "text": "Yes: bees pollinate"},
                                                              {"type": "image_url", "image_url": {"url": "x"}},
                                                              {"type": "text", "text": "many crops."}]}]


def with_messages(table: pa.Table, conversation=CONVERSATION) -> pa.Table:
    value = [conversation] * table.num_rows
    return table.append_column("messages", pa.array(value)) if table.num_rows else \
        table.append_column("messages", pa.array([], pa.array([CONVERSATION]).type))


class TestMessagesContract(OperatorContract):
    operator_name = "retrieve.messages"

    def make_input(self, n_queries: int = 3, per_query: int = 5) -> pa.Table:
        return with_messages(sample_results(n_queries, per_query))


def test_earlier_answers_come_first_and_retrieved_rows_keep_their_order():
    results = with_messages(sample_results(2, 4))
    out = create("retrieve.messages", {}, step_id="chat")(results)
    for qid in ("q1", "q2"):
        rows = [r for r in out.to_pylist() if r["qid"] == qid]
        retrieved = [r for r in results.to_pylist() if r["qid"] == qid]
        assert [r["source"] for r in rows] == ["conversation"] * 2 + ["retrieval"] * 4
        assert [r["text"] for r in rows[:2]] == ["Yes: bees pollinate many crops.",
                                                 "Honey bees make honey from the nectar of flowers."]
        assert [r["docno"] for r in rows[:2]] == ["message-4", "message-2"]
        assert [r["docno"] for r in rows[2:]] == [r["docno"] for r in retrieved]
        assert [r["rank"] for r in rows] == list(range(1, 7)) == [r["rank_chat"] for r in rows]
        assert min(r["score"] for r in rows[:2]) > max(r["score"] for r in retrieved)
        assert rows[0]["query"] == retrieved[0]["query"] and rows[0]["title"] is None


def test_a_chat_answer_comes_back_without_its_sources_list_and_citations():
    """/v1/chat/completions appends 'Sources:' and its references to each answer and numbers its citations by that
    turn's context; a client sends the answer back as it got it. As a context row that list repeated the sources
    (they are retrieved rows of their own) and its [1] pointed at the wrong document of the new context."""
    answer = "Honey bees make honey [1] from nectar [1, 2].\n\nSources:\n[1] Bees (bees#0)\n[2] Flowers (flowers#0)"
    conversation = [{"role": "user", "content": "Which insects make honey?"}, {"role": "assistant", "content": answer},
                    {"role": "user", "content": "And wax?"}, {"role": "assistant", "content": [
                        {"type": "text", "text": "Honey bees make honey from nectar [2]."}]}]
    queries = pa.table({"qid": ["q1"], "query": ["How?"], "messages": [json.dumps(conversation)]})
    out = create("retrieve.messages", {})(queries)
    assert out.column("text").to_pylist() == ["Honey bees make honey from nectar."]  # the same answer once
    assert out.column("docno").to_pylist() == ["message-3"]


def test_a_queries_table_gives_the_messages_alone_and_json_text_is_read():
    queries = pa.table({"qid": ["q1", "q2"], "query": ["Do they pollinate?", "no history"],
                        "messages": [json.dumps(PARTS), None]})
    out = create("retrieve.messages", {"max_messages": 1})(queries)
    assert out.select(["qid", "docno", "text", "source", "rank"]).to_pylist() == [
        {"qid": "q1", "docno": "message-4", "text": "Yes: bees pollinate many crops.", "source": "conversation",
         "rank": 1}]


def test_roles_limits_and_repeats():
    repeated = CONVERSATION + [{"role": "assistant", "content": "Honey bees make honey from the nectar of flowers "
                                                               "[1]."}, {"role": "user", "content": "Thanks"}]
    queries = pa.table({"qid": ["q1"], "query": ["x"], "messages": [json.dumps(repeated)]})
    out = create("retrieve.messages", {"roles": ["assistant", "user"], "max_chars": 20})(queries)
    assert out.column("text").to_pylist() == ["Thanks", "Honey bees make hone", "Yes: bees pollinate"]
    assert out.column("docno").to_pylist() == ["message-6", "message-5", "message-4"]


def test_a_query_without_messages_keeps_its_rows():
    results = sample_results(1, 3).append_column("messages", pa.array([None] * 3, pa.string()))
    out = create("retrieve.messages")(results)
    assert out.column("docno").to_pylist() == results.column("docno").to_pylist()
    assert set(out.column("source").to_pylist()) == {"retrieval"}


def test_a_blank_messages_cell_is_no_conversation():
    """A table whose first turns leave the messages cell empty ("") was refused as "text but not JSON"."""
    results = sample_results(1, 3).append_column("messages", pa.array([""] * 3, pa.string()))
    out = create("retrieve.messages")(results)
    assert out.column("docno").to_pylist() == results.column("docno").to_pylist()


def test_bad_messages_name_the_column():
    queries = pa.table({"qid": ["q1"], "query": ["x"], "messages": ["not json"]})
    with pytest.raises(OperatorError, match="params.messages_column.*not JSON"):
        create("retrieve.messages")(queries)
    queries = pa.table({"qid": ["q1"], "query": ["x"], "messages": ['{"role": "user"}']})
    with pytest.raises(OperatorError, match="holds dict"):
        create("retrieve.messages")(queries)
    with pytest.raises(ParamsError, match="must be 'assistant', 'user'"):  # a role no message has
        create("retrieve.messages", {"roles": ["assistant", "robot"]})


def test_queries_without_a_messages_column_are_a_first_turn_not_an_error():
    """A flow with retrieve.messages refused `tessera run -q "..."` (no conversation: no messages column), while
    a queries file where only some queries carry one ran, and query.contextualize takes either."""
    assert create("retrieve.messages")(pa.table({"qid": ["q1"], "query": ["honey"]})).num_rows == 0
    results = sample_results(1, 3)
    out = create("retrieve.messages")(results)
    assert out.column("docno").to_pylist() == results.column("docno").to_pylist()
    assert set(out.column("source").to_pylist()) == {"retrieval"}


def test_a_declined_reply_is_no_context_row():
    """A turn the answer step declined ("The documents found do not answer this question.") became the follow-up's
    first context row, above every retrieved document; it is left out, the answers before it stay."""
    from operators.conversation import NO_ANSWER

    talk = CONVERSATION + [{"role": "user", "content": "Who designed the Eiffel Tower?"},
                           {"role": "assistant", "content": NO_ANSWER}]
    out = create("retrieve.messages", {})(with_messages(sample_results(1, 2), talk))
    rows = [r for r in out.to_pylist() if r["source"] == "conversation"]
    assert [r["text"] for r in rows] == ["Yes: bees pollinate many crops.",
                                         "Honey bees make honey from the nectar of flowers."]
    out = create("retrieve.messages", {"declined_replies": []})(with_messages(sample_results(1, 2), talk))
    assert [r["text"] for r in out.to_pylist()][0] == NO_ANSWER


def _expanded_results(per_query: int) -> pa.Table:
    """Results of a rewritten query q1 and its extra query q1#1, as a retriever gives them: each row carries its
    query's columns (``original_qid``, ``original_query``, a query's own ``lang``) beside its document's."""
    qids = ["q1"] * per_query + ["q1#1"] * per_query
    n = len(qids)
    return pa.table({"qid": qids, "query": ["bees"] * per_query + ["bee honey"] * per_query,
                     "original_qid": ["q1"] * n, "original_query": ["bees"] * n, "lang": ["en"] * n,
                     "messages": [json.dumps(CONVERSATION)] * n, "docno": [f"d{i}" for i in range(n)],
                     "doc_id": [f"d{i}" for i in range(n)], "title": [f"T{i}" for i in range(n)],
                     "text": ["x"] * n, "score": [float(n - i) for i in range(n)],
                     "rank": [i % per_query + 1 for i in range(n)]})


def test_message_rows_carry_their_querys_columns_so_expanded_queries_can_merge_them():
    # They carried qid, query and messages alone: fuse.expanded_queries read a null original_qid and failed on
    # rows without a qid, and a query's own columns (lang) were null on them.
    out = create("retrieve.messages", step_id="msgs")(_expanded_results(per_query=2))
    messages = out.filter(pa.compute.equal(out.column("source"), "conversation")).to_pylist()
    assert {(row["qid"], row["original_qid"], row["original_query"], row["lang"]) for row in messages} == {
        ("q1", "q1", "bees", "en"), ("q1#1", "q1", "bees", "en")}
    assert {(row["title"], row["doc_id"], row["score_bm25"] if "score_bm25" in row else None) for row in messages} \
        == {(None, None, None)}  # the documents' columns stay theirs
    merged = create("fuse.expanded_queries", step_id="merged")(out)
    assert set(merged.column("qid").to_pylist()) == {"q1"}
    assert merged.column("docno").to_pylist()[:2] == ["message-4", "message-2"]


def test_with_one_row_a_query_message_rows_take_no_document_column():
    """A query of one row cannot tell its document's columns from its own: the message rows take the query and
    rewrite columns alone, not the document's title or doc_id (a dedup by doc_id dropped them)."""
    out = create("retrieve.messages", step_id="msgs")(_expanded_results(per_query=1))
    messages = out.filter(pa.compute.equal(out.column("source"), "conversation")).to_pylist()
    assert {(row["original_qid"], row["title"], row["doc_id"]) for row in messages} == {("q1", None, None)}
