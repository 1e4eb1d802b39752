"""query.contextualize: a follow-up question made to stand on its own, from the conversation before it."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

import pyarrow as pa
from pydantic import Field

from operators.conversation import (answer_text, content_text, declined_replies_field, is_declined, normalise,
                                    read_messages)
from operators.llm.gateway import Completion, LLMError
from operators.llm.step import LLMParams, LLMStep, junk_reason
from operators.tables import require_columns, set_column

_LEAD = re.compile(r"^\s*(?:\**\s*(?:standalone|rewritten|new)?\s*question\s*\**\s*:\s*)", re.I)
_WORD = re.compile(r"[^\W_]+")


class ContextualizeParams(LLMParams):
    method: Literal["history", "llm"] = Field(
        "history", description="'history': the question followed by the conversation's last turns (no model; "
        "what a retriever needs: the words the question refers to); 'llm': the model rewrites the question so it "
        "stands alone, 'history' when its reply is not one question.")
    messages_column: str = Field("messages", description="Query column holding the conversation before the "
                                 "question (OpenAI-style role/content list, or its JSON text).")
    query_column: str = Field("query", description="Column holding the question; it receives the standalone one.")
    original_column: str = Field("original_query", description="Column that keeps the question as it was asked.")
    turns: int = Field(2, gt=0, le=20, description="Earlier messages used, the most recent ones.")
    roles: list[Literal["user", "assistant"]] = Field(["user", "assistant"], min_length=1,
                                                      description="Roles whose messages are used.")
    max_chars: int = Field(300, gt=0, description="Each earlier message is cut to this many characters (its "
                           "'Sources:' list and [1] citations dropped first).")
    declined_replies: list[str] = declined_replies_field()
    min_words: int = Field(2, ge=1, description="llm: a rewritten question with fewer words is not taken.")
    max_question_chars: int = Field(400, gt=0, description="llm: a rewritten question longer than this is not "
                                    "taken.")
    max_tokens: int = Field(64, gt=0, le=32768, description="Most tokens the model may write per call.")


class QueryContextualizer(LLMStep):
    """Make each follow-up question stand on its own, from the conversation before it (a chat's second question).

    "How do they make it?" means nothing to a retriever; after "Which insects make honey?" and
    its answer it means "how do honey bees make honey". The query's ``messages`` column holds
    the conversation before the question (OpenAI-style messages, as ``/v1/chat/completions``
    receives them, or their JSON text; a last user message equal to the question is dropped).
    ``method: history`` (no model) writes the question followed by the last ``turns`` user
    and assistant messages in parentheses: the words a question's "it" and "they" refer to,
    which is what BM25 and dense retrieval need (the MuSiQue follow-ups in docs/results.md).
    ``method: llm`` asks the model to rewrite the question; a reply that is not one question
    (empty, a failed call, fewer than ``min_words`` words, longer than
    ``max_question_chars``, or no word the question lacks) marks the query degraded and takes
    the history form instead. The standalone question replaces ``query`` (every step after
    sees it: retrievers, context, answer), the question as asked stays in ``original_query``,
    and the query's metadata gets ``standalone_query``. A query without earlier messages is
    left as it is, with no call. Rows of any table work (queries or results): the rewrite is
    per qid.

    Usage::

        steps:
          standalone: {op: query.contextualize}
          bm25:       {op: retrieve.bm25, params: {k: 20}}
          dense:      {op: retrieve.dense, params: {k: 20}, inputs: [standalone]}
    """

    name = "query.contextualize"
    version = "4"  # 2: the standalone query stored with the row; 3: a declined reply is left out of the history;
    # 4: so is the service's reply that is no answer ("No answer could be written (...)")
    aliases = ("contextualize", "condense_question", "QueryContextualizer")
    scope = "row"
    Params: ClassVar[type[ContextualizeParams]] = ContextualizeParams
    cacheable_if: ClassVar[str | None] = "method == 'history' or temperature == 0 or seed is set"
    system_prompt = ("You rewrite the last question of a conversation so that it can be understood without the "
                     "conversation: replace words such as it, they, he, she, that and there with what they refer "
                     "to. Reply with the rewritten question only.")
    prompt_template = "Conversation:\n{conversation}\n\nLast question: {query}\n\nRewritten question:"
    prompt_fields = ("conversation", "query")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.params.method == "history":  # no model is called: the output depends on the rows alone, and
            self.cacheable = True             # on Ray the step runs as tasks, not on an LLM step's actor pool
            self.concurrency = None  # type: ignore[misc]

    def calls_model(self) -> bool:
        return self.params.method == "llm"

    def reads(self) -> list[str]:
        return ["qid", self.params.query_column, self.params.messages_column]

    def requires(self) -> list[str]:
        return ["qid", self.params.query_column]

    def produces(self) -> dict[str, str]:
        # the query column is declared too: it is rewritten, and a cache hit must bring the standalone one back
        return {self.params.query_column: "data", self.params.original_column: "data"}

    def cache_identity(self) -> dict[str, Any]:
        if self.params.method == "history":  # the model and its prompts play no part
            own = set(ContextualizeParams.model_fields) - set(LLMParams.model_fields)
            return self.params.model_dump(mode="json", include=own | {"on_error"})
        return super().cache_identity()

    def metadata_keys(self) -> frozenset[str]:
        return frozenset({"standalone_query"})

    def transform(self, table: pa.Table) -> pa.Table:
        p = self.params
        require_columns(table, self.requires(), op=self.name, step=self.step_id)
        asked = table.column(p.query_column).to_pylist()
        qids = [str(q) for q in table.column("qid").to_pylist()]
        conversations: dict[str, tuple[str, list[tuple[str, str]]]] = {}
        if p.messages_column in table.column_names:
            read: set[str] = set()  # a qid's conversation is on each of its rows: read it once
            for qid, question, value in zip(qids, asked, table.column(p.messages_column).to_pylist()):
                if qid not in read:
                    read.add(qid)
                    if earlier := self._earlier(value, qid, question or ""):
                        conversations[qid] = (question or "", earlier)
        standalone = {qid: history_form(question, earlier) for qid, (question, earlier) in conversations.items()}
        if p.method == "llm" and conversations:
            standalone.update(self._rewritten(conversations))
        for qid, text in standalone.items():
            self.emit_metadata(qid, "standalone_query", text)
        table = set_column(table, p.original_column, pa.array(asked, pa.string()))
        queries = [standalone.get(qid, question) for qid, question in zip(qids, asked)]
        return set_column(table, p.query_column, pa.array(queries, pa.string()))

    def _earlier(self, value: Any, qid: str, question: str) -> list[tuple[str, str]]:
        """(role, text) of the last ``turns`` messages of the used roles before the question, in order."""
        p = self.params
        messages = read_messages(value, qid=qid, column=p.messages_column, op=self.name, step=self.step_id)
        if messages and messages[-1].get("role") == "user" and \
                normalise(content_text(messages[-1].get("content")), None) == normalise(question, None):
            messages = messages[:-1]  # the conversation given with the question in it
        earlier = []
        for message in messages:
            text = answer_text(message.get("content"))
            if message.get("role") == "assistant" and is_declined(text, p.declined_replies):
                continue
            text = normalise(text, p.max_chars)
            if message.get("role") in p.roles and text:
                earlier.append((str(message["role"]), text))
        return earlier[-p.turns:]

    def _rewritten(self, conversations: dict[str, tuple[str, list[tuple[str, str]]]]) -> dict[str, str]:
        prompts = {qid: self.render(query=question, conversation="\n".join(f"{role.title()}: {text}"
                                                                          for role, text in earlier))
                   for qid, (question, earlier) in conversations.items()}
        rewritten = {}
        for qid, reply in self.ask(prompts).items():
            text, problem = self._question_of(reply, conversations[qid][0])
            if problem is None:
                rewritten[qid] = text
            else:  # the history form, already in place, stands
                self.degrade(qid, f"{problem}; the question was given its conversation instead")
        return rewritten

    def _question_of(self, reply: Completion | LLMError, question: str) -> tuple[str, str | None]:
        """The rewritten question in a reply, or why there is none."""
        problem = junk_reason(reply)
        if problem is not None:
            return "", problem
        assert isinstance(reply, Completion)
        line = next((ln for ln in reply.text.splitlines() if ln.strip()), "")
        text = _LEAD.sub("", line).strip().strip("\"'`").strip()
        words = len(_words(text))
        if words < self.params.min_words:
            return "", f"the rewritten question has {words} word(s) ({text[:60]!r})"
        if len(text) > self.params.max_question_chars:
            return "", f"the rewritten question is {len(text)} characters long"
        if not _words(text) - _words(question):
            return "", f"the rewrite adds no word to the question ({text[:60]!r})"
        return text, None


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)}


def history_form(question: str, earlier: list[tuple[str, str]]) -> str:
    """The question with the conversation's last turns after it: ``question (turn; turn)``; an empty question is the
    turns alone, ``(turn; turn)``, with no space before them."""
    return f"{question.strip()} ({'; '.join(text for _, text in earlier)})".lstrip()
