"""A conversation as a query carries it: OpenAI-style ``[{role, content}, ...]`` messages in a query column (what
``/v1/chat/completions`` receives), read the same way by every operator that uses one (``retrieve.messages``,
``query.contextualize``, ``sources.grpo``)."""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from operators.errors import OperatorError


def read_messages(value: Any, *, qid: str, column: str, op: str, step: str | None) -> list[dict[str, Any]]:
    """The messages of one query's ``column`` value: a list of ``{role, content}`` dicts, or the same as JSON text;
    None, or text that is empty or blank (a first turn's cell in a table), is no conversation. Anything else is an
    ``OperatorError`` naming the query and the column."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return []
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            raise OperatorError(f"query {qid}: '{column}' is text but not JSON; give a list of {{role, content}} "
                                "messages", op=op, step=step, field="params.messages_column") from None
    if not isinstance(value, list) or not all(isinstance(m, dict) for m in value):
        raise OperatorError(f"query {qid}: '{column}' holds {type(value).__name__}, not a list of {{role, content}} "
                            "messages", op=op, step=step, field="params.messages_column")
    return value


def content_text(content: Any, sep: str = " ") -> str:
    """A message's text: a string, or OpenAI's list of parts (the text of its text parts, joined with ``sep``;
    an image's or audio's part has none)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return sep.join(str(part.get("text") or "") for part in content
                        if isinstance(part, dict) and part.get("type", "text") == "text")
    return ""


#: Tessera's own chat answers end with their numbered references (``/v1/chat/completions`` appends them), and cite
#: ``[1]`` by the numbers of that turn's context: neither means anything in a later turn's context or question.
_SOURCES_TAIL = re.compile(r"\n\s*\n\s*Sources?:\s*\n.*\Z", re.S | re.I)
_CITATIONS = re.compile(r"\s*\[\d+(?:\s*,\s*\d+)*\]")


def answer_text(content: Any) -> str:
    """A message's text (``content_text``) without the ``Sources:`` list and the ``[1]`` citations a chat answer
    carries: what the earlier turn said, to be read again in a later one."""
    return _CITATIONS.sub("", _SOURCES_TAIL.sub("", content_text(content)))


def normalise(text: str, max_chars: int | None) -> str:
    """Unicode NFKC, one space between words, cut at ``max_chars`` (None: whole)."""
    text = " ".join(unicodedata.normalize("NFKC", text).split())
    return text[:max_chars].rstrip() if max_chars else text


#: generate.answer's default ``no_answer``: the reply of a turn none of whose documents was close to the question.
NO_ANSWER = "The documents found do not answer this question."


#: How the service's chat begins a reply that is no answer (``serve.chat.chat_flows``: "No answer could be written
#: (why).").
NOT_WRITTEN = "No answer could be written"


def is_declined(text: str, declined: list[str]) -> bool:
    """Whether a message's text is one of the ``declined`` replies, or the service's reply that is no answer
    (``NOT_WRITTEN``): a turn that found nothing, whose words are about answering ("documents", "answer",
    "question"), not about the subject, so a later turn's search and context would only be misled by them. A client
    that cannot tell such a reply (Cohere's) sends it back, and it was searched for."""
    said = normalise(text, None).casefold()
    return said.startswith(f"{NOT_WRITTEN} (".casefold()) or any(
        said == normalise(reply, None).casefold() for reply in declined)


def declined_replies_field() -> Any:
    """The ``declined_replies`` param of the operators that read a conversation (``is_declined``)."""
    from pydantic import Field

    return Field(default_factory=lambda: [NO_ANSWER], description="Assistant replies that say nothing was found "
                 "(generate.answer's no_answer): left out, as their words are about answering, not the subject; a "
                 "flow whose answer step sets another no_answer lists it here.")
