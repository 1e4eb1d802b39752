"""Answers as they are written (answer_stream): the pieces a chat gets are the start of the answer as it is read
at the end, whatever the model's labels, sections and citations; generate.answer streams to a sink only when one
waits, and a stream that breaks degrades the query like any failed call."""

from __future__ import annotations

import re

import pytest

from operators.generate.answer import parse_answer
from operators.generate.answer_stream import AnswerStream, answer_sink, streaming_answers
from operators.registry import create
from operators.testing import sample_results

REPLIES = [
    "Answer: Honey bees make honey [Document 1] from nectar [2, 3].\nReasoning: document 1 says so.\nSources: 1",
    "**Answer**: Yes.",
    "The answer is 1945 [1]\n\nSources: [1], [2]",
    "Bees make honey [1].\n\nThey store it in combs [Doc 2].",
    "No document says.",
]


def pieces_of(reply: str, how: str) -> list[str]:
    return list(reply) if how == "chars" else re.findall(r"\s*\S+", reply)


@pytest.mark.parametrize("how", ["chars", "words"])
@pytest.mark.parametrize("reply", REPLIES)
def test_the_pieces_are_the_start_of_the_answer_as_read(reply, how):
    stream = AnswerStream(lambda text: parse_answer(text, 3)["answer"])
    pieces = [stream.feed(piece) for piece in pieces_of(reply, how)]
    sent, final = "".join(pieces), parse_answer(reply, 3)["answer"]
    assert final.startswith(sent) and sent == stream.sent
    assert len(sent.split()) >= len(final.split()) - 2  # all but the last word or citation went out as they came
    for label in ("Answer", "Reasoning", "Sources", "Document", "Doc ", "**"):
        assert label not in sent


def test_a_later_label_that_rewrites_the_answer_stops_the_pieces():
    stream = AnswerStream(lambda text: parse_answer(text, 1)["answer"])
    sent = "".join(stream.feed(p) for p in pieces_of("Honey comes from bees [1].\nAnswer: Bees make honey.", "words"))
    assert sent == "Honey comes from bees" and parse_answer(stream.reply, 1)["answer"] == "Bees make honey."


def test_the_sink_belongs_to_the_block_and_the_thread():
    import threading

    got: list = []
    with streaming_answers(lambda qid, text: got.append(text)):
        assert answer_sink() is not None
        seen = []
        threading.Thread(target=lambda: seen.append(answer_sink())).start()
    assert answer_sink() is None
    for _ in range(50):
        if seen:
            break
        threading.Event().wait(0.01)
    assert seen == [None]


def answer_with_sink(model: str, **params) -> tuple[dict, list[tuple[str, str]]]:
    op = create("generate.answer", {"model": model, "num_retries": 0, **params}, step_id="answer")
    table = create("generate.context", {"max_context_length": 300})(sample_results(2, 3))
    got: list[tuple[str, str]] = []
    with streaming_answers(lambda qid, text: got.append((qid, text))):
        op(table)
    return op.drain_metadata(), got


def test_generate_answer_streams_to_a_waiting_sink(fault_models):
    meta, got = answer_with_sink("fault-ok")
    for qid in ("q1", "q2"):
        pieces = [text for q, text in got if q == qid]
        assert len(pieces) >= 3  # word by word, not the answer at once
        # word by word while written; the last word and the citation once the reply is whole: the answer entire
        assert pieces[-1] == " [1]." and "".join(pieces) == meta[qid]["answer"] == "Honey bees make honey [1]."
    streamed = [body for body in fault_models.bodies if body.get("stream")]
    assert len(streamed) == 2 and streamed[0]["stream_options"] == {"include_usage": True}
    assert meta["q1"]["usage"]["answer"]["completion_tokens"] == 7  # the stream's usage, as unstreamed


def test_nothing_streams_without_a_sink_or_for_a_short_answer(fault_models):
    create("generate.answer", {"model": "fault-ok"})(create("generate.context")(sample_results(1, 2)))
    _, got = answer_with_sink("fault-ok", style="short")
    assert got == [] and not any(body.get("stream") for body in fault_models.bodies)


def test_a_stream_that_breaks_degrades_the_query(fault_models):
    meta, got = answer_with_sink("fault-midstream")
    assert "".join(text for q, text in got if q == "q1") == "Honey bees"  # what came before the break
    assert "broke off" in meta["q1"]["degraded"]["reason"] and "answer" not in meta["q1"]


@pytest.mark.slow  # the embedded model, stopped between tokens
def test_a_cancel_while_the_answer_streams_stops_the_model():
    """What a chat does when its client goes away: the flow's cancel stops the streamed generation mid-answer."""
    from flows.executors import make_executor
    from flows.progress import CancelToken
    from flows.spec import FlowSpec
    from operators.errors import FlowCancelled

    spec = FlowSpec.parse({"name": "answers", "steps": {
        "context": {"op": "generate.context", "params": {"max_context_length": 300}},
        "answer": {"op": "generate.answer", "params": {"model": "local", "max_tokens": 200,
                                                       "prompt": "{context}\n\nWrite a long essay about: {query}"}}}})
    cancel, got = CancelToken(), []

    def sink(qid: str, text: str) -> None:
        got.append(text)
        if len(got) == 3:
            cancel.cancel("the client closed the stream")

    with pytest.raises(FlowCancelled, match="closed the stream"), streaming_answers(sink):
        make_executor("local").run(spec, sample_results(1, 2), cancel=cancel)
    assert 3 <= len(got) <= 5  # stopped at the next token, not after 200


@pytest.mark.parametrize("reply, answer", [
    ("孟姜女的丈夫被征去修长城，死在了工地上 [1]。\nSources: 1", "孟姜女的丈夫被征去修长城，死在了工地上 [1]。"),
    ("大熊猫以竹子为主要食物[Document 1]。", "大熊猫以竹子为主要食物[1]。"),
    ("富士山の標高は3776メートルです。", "富士山の標高は3776メートルです。"),
])
def test_a_chinese_or_japanese_answer_streams_as_it_is_written_not_at_its_end(reply, answer):
    """Their text has no spaces, so the answer was one "last word" held back to the end: a chat streamed nothing."""
    stream = AnswerStream(lambda text: parse_answer(text, 3)["answer"])
    pieces = [stream.feed(piece) for piece in reply]
    assert parse_answer(reply, 3)["answer"] == answer and answer.startswith(stream.sent)
    assert sum(1 for p in pieces if p) >= 8  # character by character, not one piece at the end
    assert len(stream.sent) >= len(answer) - 6  # all but what could still grow: a citation, a number, a stop
    for label in ("Sources", "Document"):
        assert label not in stream.sent
