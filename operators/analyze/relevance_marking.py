"""The passages of a text most relevant to the query, marked with `**` by a language model (mosaicRAG's
relevance marking), checked so that the text itself never changes."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field

from operators.llm import Completion, LLMError, LLMParams, junk_reason
from operators.llm.rowwise import Reply, RowwiseLLMStep

MARK = "**"
_ECHOED = re.compile(r"^\s*(\[ANSWER\]|\[TEXT_START\])\s*|\s*\[TEXT_END\]\s*$")


class RelevanceMarker(RowwiseLLMStep):
    """Mark the passages of each row's text most relevant to the query with `**` (one call per row), checked.

    The model is asked to copy the text and put ``**`` around the passages that answer
    the query (``query`` overrides the flow's query, as mosaicRAG's step does). Its reply
    is accepted only when it is the original text plus markers: with the markers taken
    out it must equal the input, whitespace normalised, and the markers must pair up.
    The markers are then put into the original text, so its own spacing and line breaks
    stay. Otherwise (a changed text, no marker, a call that failed or timed out) the row
    keeps its text unmarked, ``reason_column`` says why, and the query is marked degraded.
    The reply repeats the whole text: give ``max_tokens`` room for it. Prompt fields:
    ``{query}``, ``{text}``.

    Usage::

        RelevanceMarker({"model": "gemma2"})(results)   # marked_text, marking_problem columns
    """

    name = "analyze.relevance_marking"
    version = "2"  # an empty marked span and a text holding ** already are refused
    aliases = ("RelevanceMarkingStep",)
    scope = "query"

    system_prompt: ClassVar[str] = (
        "You highlight the passages of a text that are most relevant to a query by putting two asterisks (**) "
        "before and after each of them. Copy the text exactly: do not add, remove or change any word. Reply with "
        "the text only.\n\nExample:\nQuery: where do penguins live\nText: Penguins are birds that cannot fly. "
        "Most penguins live in the Southern Hemisphere, many in Antarctica.\nReply: Penguins are birds that "
        "cannot fly. **Most penguins live in the Southern Hemisphere, many in Antarctica.**")
    prompt_template: ClassVar[str] = "Query: {query}\nText: {text}\nReply:"
    prompt_fields: ClassVar[tuple[str, ...]] = ("query", "text")
    prompt_required: ClassVar[tuple[str, ...]] = ("text",)

    class Params(LLMParams):
        max_tokens: int = Field(512, gt=0, le=32768, description="Most tokens the model may write per row; the "
                                "reply repeats the whole text, so a longer text needs more.")
        input_column: str = Field("text", description="Column holding the text to mark.")
        output_column: str = Field("marked_text", description="Column that receives the text with its relevant "
                                   "passages between ** (the text unmarked when the reply failed the check).")
        reason_column: str = Field("marking_problem", description="Column that says why a row stayed unmarked "
                                   "(null when it was marked).")
        query: str | None = Field(None, description="Marks what is relevant to this text instead of the flow's "
                                  "query (mosaicRAG's per-step query); null: each row's query.")

    def reads(self) -> list[str]:
        return ["qid", "query", self.params.input_column]

    def requires(self) -> list[str]:
        return ["qid", self.params.input_column] + ([] if self.params.query else ["query"])

    def produces(self) -> dict[str, str]:
        return {self.params.output_column: "text", self.params.reason_column: "data"}

    def messages(self, row: dict[str, Any]) -> list[dict[str, Any]] | None:
        text = row[self.params.input_column]
        query = self.params.query or row.get("query") or ""
        return self.render(query=query, text=text) if text and text.strip() else None

    def apply(self, row: dict[str, Any], reply: Reply | None) -> tuple[dict[str, Any], str | None]:
        text = row[self.params.input_column]
        marked, problem = (text, None) if reply is None else mark(text, reply)
        return {self.params.output_column: marked, self.params.reason_column: problem}, problem


def mark(original: str, reply: Completion | LLMError) -> tuple[str, str | None]:
    """The original text with the reply's markers, or the original text and why the reply cannot be used."""
    problem = junk_reason(reply)
    if problem is not None or not isinstance(reply, Completion):
        return original, problem
    if MARK in original:  # its own markers could not be told from the model's
        return original, f"the text holds {MARK} of its own, so the model's markers cannot be told apart"
    text = _ECHOED.sub("", reply.text.strip())
    count = text.count(MARK)
    cut = " (the reply stopped at max_tokens)" if reply.finish_reason == "length" else ""
    if " ".join(text.replace(MARK, "").split()) != " ".join(original.split()):
        return original, "the reply is not the original text plus markers" + cut
    if count == 0:
        return original, "the reply marks no passage"
    if count % 2:
        return original, f"the reply's {MARK} markers do not pair up ({count} of them)"
    if any(not span.strip() for span in text.split(MARK)[1::2]):
        return original, "the reply marks an empty passage"
    return place_markers(original, text), None


def place_markers(original: str, marked: str) -> str:
    """Put ``marked``'s markers into ``original`` at the same places among its non-space characters.

    ``marked`` without its markers has the same non-space characters as ``original``, so a
    marker's place is the count of non-space characters before it; opening markers go before
    the next character, closing ones right after the last, keeping the original's spacing.
    """
    pieces = marked.split(MARK)
    positions = []  # non-space characters before each marker
    seen = 0
    for piece in pieces[:-1]:
        seen += len("".join(piece.split()))
        positions.append(seen)
    nonspace = [i for i, ch in enumerate(original) if not ch.isspace()]
    inserts: dict[int, list[str]] = {}
    for n, count in enumerate(positions):
        opening = n % 2 == 0
        if opening:
            at = nonspace[count] if count < len(nonspace) else len(original)
        else:
            at = nonspace[count - 1] + 1 if count > 0 else 0
        inserts.setdefault(at, []).append(MARK)
    out = []
    for i, ch in enumerate(original):
        out.extend(inserts.get(i, []))
        out.append(ch)
    out.extend(inserts.get(len(original), []))
    return "".join(out)
