"""Answers as they are written: ``generate.answer`` streams its reply to a sink that a chat sets for the run.

A chat (``/v1/chat/completions`` with a flow, ``tessera chat``) runs its flow inside
``streaming_answers(sink)``; within that block, on that thread, ``generate.answer`` asks its
model with streaming on, and ``sink(qid, text)`` gets each new piece of the answer as the model
writes it. The pieces are the answer as ``parse_answer`` reads it from the reply so far
(``AnswerStream``): labels (``Answer:``) and the ``Reasoning:``/``Sources:`` sections are left
out, citations are written ``[1]``, and the last word and an unclosed ``[`` wait until they are
complete, so what was sent is almost always the start of the final answer; once the reply is
read whole, the rest of the answer follows (its last word), so the pieces make the answer. A
degraded answer's pieces stop where the reply went wrong. A cached step, a
``style: short`` answer and the Ray executor send nothing here: the chat gets the whole answer
when the flow ends.

Usage::

    with streaming_answers(lambda qid, text: print(text, end="", flush=True)):
        result = make_executor("local").run(flow, queries)
"""

from __future__ import annotations

import re
from typing import Callable, ContextManager

from operators.thread_value import ThreadValue

#: The operator that writes a flow's answer: a flow with this step is one a chat can talk to.
ANSWER_OP = "generate.answer"
Sink = Callable[[str, str], None]
_sink: ThreadValue[Sink] = ThreadValue()
_UNCLOSED = re.compile(r"\[[^\]]*$")


def _after_last_cjk(text: str) -> int:
    """Where the last Chinese, Japanese or Korean character of ``text`` ends (0 when it has none)."""
    from operators.store.cjk import cjk_characters

    cjk = cjk_characters()
    return next((i + 1 for i in range(len(text) - 1, -1, -1) if text[i] in cjk), 0)


def streaming_answers(sink: Sink) -> ContextManager[None]:
    """Within this block, on this thread, answers go to ``sink(qid, text)`` piece by piece as they are written."""
    return _sink.holding(sink)


def answer_sink() -> Sink | None:
    """This thread's sink, or None when nobody is waiting for answers as they are written."""
    return _sink.get()


class AnswerStream:
    """A reply read as it arrives: ``feed`` takes the model's next piece and returns the answer's new text.

    ``read`` is what the answer step makes of a whole reply (its answer text)."""

    def __init__(self, read: Callable[[str], str]) -> None:
        self.read = read
        self.reply = ""
        self.sent = ""

    def feed(self, piece: str) -> str:
        """The new text of the answer that is safe to show (possibly ''), after adding ``piece`` to the reply."""
        self.reply += piece
        answer = self.read(self.reply)
        # The last word may still grow (or become a label), and the space before a label is no part of the answer;
        # a Chinese or Japanese character is a word that is whole (their text has no spaces: it all waited to the end)
        stable = answer[:max(answer.rfind(" "), answer.rfind("\n"), _after_last_cjk(answer))].rstrip()
        if (unclosed := _UNCLOSED.search(stable)) is not None:  # "[Document 1" becomes "[1]" once it closes
            stable = stable[:unclosed.start()].rstrip()
        if not stable.startswith(self.sent) or len(stable) <= len(self.sent):
            return ""  # a later label changed what the answer is: hold on, the chat ends with the answer as read
        new, self.sent = stable[len(self.sent):], stable
        return new


class AnswerStreams:
    """The ``AnswerStream`` of each query of one answer step, and the sink its new text goes to."""

    def __init__(self, sink: Sink, readers: dict[str, Callable[[str], str]]) -> None:
        self.sink = sink
        self.streams = {qid: AnswerStream(read) for qid, read in readers.items()}

    def feed(self, qid: str, piece: str) -> None:
        """The model's next piece of ``qid``'s reply (the step's ``on_text``)."""
        if text := self.streams[qid].feed(piece):
            self.sink(qid, text)

    def finish(self, qid: str, answer: str) -> None:
        """Send the rest of ``qid``'s final answer (what was held back), when it continues what was sent."""
        stream = self.streams[qid]
        if answer.startswith(stream.sent) and len(answer) > len(stream.sent):
            self.sink(qid, answer[len(stream.sent):])
            stream.sent = answer


def rest_of(content: str, answer: str, sent: str, degraded: bool) -> str:
    """What follows the answer's streamed pieces (``sent``) to make ``content`` (the answer, then whatever a chat
    adds after it, such as references): its end and what follows.

    A degraded answer after pieces (a reply found to be junk, a stream that broke) follows them as a new
    paragraph; an answer that a later label rewrote (rare, see ``AnswerStream``) keeps the pieces as they were
    sent, followed by what comes after the answer."""
    if content.startswith(sent):
        return content[len(sent):]
    if degraded:
        return "\n\n" + content
    return content[len(answer):]
