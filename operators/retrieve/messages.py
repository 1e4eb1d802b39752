"""Earlier answers of a conversation as context rows (pipeline helpers' MessagesRetriever)."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.conversation import answer_text, declined_replies_field, is_declined, normalise, read_messages
from operators.metadata_columns import RESERVED
from operators.retrieve._index_retriever import REWRITE_COLUMNS
from operators.tables import concat, group_by_qid, query_rows, ranking_columns, set_column, set_ranking


class MessagesRetriever(Operator):
    """Put a conversation's earlier assistant messages first among a query's rows, for follow-up questions.

    The conversation is the query's ``messages`` column: OpenAI-style ``[{role, content}, ...]``
    (a list of structs, or the same as JSON text; ``content`` may be a string or a list of
    ``{type: text, text}`` parts), as the ``/v1/chat/completions`` endpoint receives it.
    It travels with the query: retrievers copy query columns onto every result row, so this
    step may come after them. The last ``max_messages`` messages whose role is in
    ``roles`` become rows (most recent first) with normalised text (a chat answer's ``Sources:`` list
    and ``[1]`` citations dropped: its documents come back as rows of their own; Unicode NFKC, one space
    between words, cut at ``max_chars``; empty and repeated messages dropped), docno
    ``message-<position in the conversation>``, ``source`` = ``conversation`` (retrieved rows
    get ``retrieval``), the query's columns (``original_qid``: ``fuse.expanded_queries`` may follow), and
    scores above every retrieved row of the query, so that a context builder reads them first; the retrieved
    rows keep their order below them
    (``rank`` renumbered by ``set_ranking``). On a queries table (no ``docno``) the rows
    are the messages alone. A query without messages keeps its rows as they were.

    Usage::

        MessagesRetriever()(pa.table({"qid": ["q1"], "query": ["and its population?"], "messages": [[
            {"role": "user", "content": "What is the capital of France?"},
            {"role": "assistant", "content": "The capital of France is  Paris."}]]}))
        # one row: docno "message-1", text "The capital of France is Paris.", source "conversation", rank 1
    """

    name = "retrieve.messages"
    version = "4"  # a declined reply is no row; 3: nor is the service's reply that is no answer; 4: query columns
    aliases = ("messages_retriever", "MessagesRetriever")
    scope = "query"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        messages_column: str = Field("messages", description="Query column holding the conversation so far "
                                     "(OpenAI-style role/content list, or its JSON text).")
        roles: list[Literal["assistant", "user", "system", "developer", "tool"]] = Field(
            default_factory=lambda: ["assistant"], min_length=1, description="Roles whose messages become rows.")
        max_messages: int = Field(3, gt=0, description="Most recent messages kept (of those roles).")
        max_chars: int | None = Field(4000, gt=0, description="Cut each message to this many characters; null "
                                      "keeps it whole.")
        source_column: str = Field("source", description="Column that says where a row came from: "
                                   "'conversation' or 'retrieval'.")
        score_margin: float = Field(1.0, gt=0, description="How far above the best retrieved score the "
                                    "lowest message row scores; each more recent message one margin higher.")
        declined_replies: list[str] = declined_replies_field()

    def reads(self) -> list[str]:
        return ["qid", self.params.messages_column]

    def requires(self) -> list[str]:
        return ["qid"]  # queries without a conversation (a first turn, `tessera run -q`) add no message rows

    def produces(self) -> dict[str, str]:
        return {"docno": "id", "text": "text", self.params.source_column: "chip", **ranking_columns(self.step_id)}

    def transform(self, table: pa.Table) -> pa.Table:
        is_results = "docno" in table.column_names
        source = self.params.source_column
        grouped, qids, bounds = group_by_qid(table)
        queries = self._query_columns(grouped, bounds) if is_results else None
        parts: list[pa.Table] = []
        scores: list[pa.Array] = []
        for i, qid in enumerate(qids):
            rows = grouped.slice(bounds[i], bounds[i + 1] - bounds[i])
            best = 0.0
            if is_results:
                parts.append(set_column(rows, source, pa.array(["retrieval"] * rows.num_rows, pa.string())))
                scores.append(_scores(rows))
                best = max(pc.max(scores[-1]).as_py() or 0.0, 0.0)
            texts = (self._texts(rows.column(self.params.messages_column)[0].as_py(), qid)
                     if self.params.messages_column in rows.column_names else [])
            if texts:
                query_row = queries.slice(i, 1) if queries is not None else rows.slice(0, 1)
                parts.append(_message_rows(query_row, texts, source))
                margin = self.params.score_margin
                scores.append(pa.array([best + margin * (len(texts) - j) for j in range(len(texts))], pa.float64()))
        if not parts:  # no rows, or a queries table whose queries have no messages
            out = table.slice(0, 0)
            for name in ("docno", "text", source):
                out = set_column(out, name, pa.array([], pa.string()))
            return set_ranking(out, pa.array([], pa.float64()), self.step_id)
        return set_ranking(concat(parts), pa.concat_arrays(scores), self.step_id)

    def _query_columns(self, grouped: pa.Table, bounds: Any) -> pa.Table:
        """One row per query of a results table (in ``group_by_qid``'s order) with its query's columns, which a
        message row carries as a retrieved row does: a rewrite's ``original_qid`` (without it
        ``fuse.expanded_queries`` gave the message rows no qid and failed), a query's own columns (a filter's
        ``lang``). Not the documents' columns (``title``, ``doc_id``, ``score_bm25``), and where every query has one
        row, which cannot tell them apart, the query and rewrite columns alone."""
        owned = set(self.produces()) | (RESERVED - {"qid", "query"})
        queries = query_rows(grouped, owned)
        if queries.num_rows == grouped.num_rows:  # a row per query: its document's columns look like the query's
            known = {"qid", "query", self.params.messages_column, *REWRITE_COLUMNS}
            queries = queries.select([c for c in queries.column_names if c in known])
        return queries

    def _texts(self, value: Any, qid: str) -> list[tuple[int, str]]:
        """(position, normalised text) of the kept messages, most recent first."""
        messages = read_messages(value, qid=qid, column=self.params.messages_column, op=self.name, step=self.step_id)
        kept: list[tuple[int, str]] = []
        seen: set[str] = set()
        for position in range(len(messages) - 1, -1, -1):
            message = messages[position]
            if message.get("role") not in self.params.roles:
                continue
            text = answer_text(message.get("content"))
            if message.get("role") == "assistant" and is_declined(text, self.params.declined_replies):
                continue
            text = normalise(text, self.params.max_chars)
            if text and text not in seen:
                seen.add(text)
                kept.append((position, text))
                if len(kept) == self.params.max_messages:
                    break
        return kept


def _scores(rows: pa.Table) -> pa.Array:
    """The retrieved rows' scores as they are (nulls too); without a score, minus the rank keeps their order."""
    if "score" in rows.column_names:
        return rows.column("score").cast(pa.float64()).combine_chunks()
    if "rank" in rows.column_names:
        return pc.negate(rows.column("rank").cast(pa.float64())).combine_chunks()
    return pa.nulls(rows.num_rows, pa.float64())


def _message_rows(query_row: pa.Table, texts: list[tuple[int, str]], source_column: str) -> pa.Table:
    """One row per message, carrying the query's columns (qid, query, messages, ...)."""
    rows = query_row.take(pa.array(np.zeros(len(texts), dtype=np.int64)))
    rows = set_column(rows, "docno", pa.array([f"message-{p}" for p, _ in texts], pa.string()))
    rows = set_column(rows, "text", pa.array([t for _, t in texts], pa.string()))
    return set_column(rows, source_column, pa.array(["conversation"] * len(texts), pa.string()))
