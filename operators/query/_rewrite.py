"""What the query operators share: more queries per query, checked, deduplicated, as extra rows.

A subclass asks the model for candidate queries (``candidates``); this base keeps the
valid ones (``min_chars``..``max_chars`` characters, a letter, ``min_words`` words, no loop),
drops those whose token overlap (Jaccard) with the original or an earlier kept query
reaches ``similarity_threshold``, keeps at most ``max_queries``, and writes each as a
row after its original: qid ``<qid>#<n>``, the original's other columns, and
``original_qid``/``query_source`` saying where it came from. A following retriever
searches every row; ``fuse.expanded_queries`` merges the rankings back per original.

The original's row lists the extra queries added for it so far (``extra_queries``), so a second rewriter
numbers past them and checks novelty against them from that row alone: a batch (or a step-cache unit) holds
one row, not always the rows an earlier rewriter added after it, and the numbering of a question's extra
queries must not depend on where a batch was cut (two different queries came out as ``b#1``).

When the model fails or returns nothing valid, the keywords of the query (its words
less English stopwords) are the extra query (``query_source: fallback_keywords``) and
the query is marked degraded with the reason (``fallback: none`` adds nothing).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, ClassVar, Container, Literal

import pyarrow as pa
from pydantic import Field, ValidationInfo, field_validator

from operators.errors import MissingColumnsError
from operators.llm.gateway import Completion, LLMError
from operators.llm.step import LLMParams, LLMStep, junk_reason
from operators.tables import require_columns

_WORD = re.compile(r"[^\W_]+")
#: On an original query's row: the extra queries the rewriters so far added for it (null on the added rows).
EXTRA_QUERIES = "extra_queries"
#: A list's mark at a line's start: a bullet, or a number or letter with its dot or bracket and a space ("1. ",
#: "2) ", "a) "); not what starts a query ("U.S. presidents", "2019: the year", "A. Lincoln's birthplace"). The
#: rewriter strips it from each line of an answer, ``query.keywords`` from each item of a list it is given.
LIST_MARK = re.compile(r"^\s*(?:[-*•]+\s*|\d{1,2}[.):]\s+|[a-z][.)]\s+|[A-Z]\)\s+)")


class RewriteParams(LLMParams):
    """An LLM step's params and the checks every generated query passes."""

    query_column: str = Field("query", description="Column holding the query text.")
    max_queries: int = Field(3, gt=0, le=50, description="Most extra queries kept per query.")
    min_chars: int = Field(8, ge=1, description="A generated query shorter than this is dropped.")
    max_chars: int = Field(200, gt=0, description="A generated query longer than this is dropped.")
    min_words: int = Field(2, ge=1, description="A generated query with fewer words is dropped.")
    similarity_threshold: float = Field(0.8, gt=0, le=1, description="A generated query whose token overlap "
                                        "(Jaccard) with the original or a kept query reaches this is a duplicate.")
    fallback: Literal["keywords", "none"] = Field(
        "keywords", description="When the model fails or returns nothing valid: 'keywords' adds the query's "
        "words less stopwords as the extra query (and marks the query degraded); 'none' adds nothing.")
    max_tokens: int = Field(96, gt=0, le=32768, description="Most tokens the model may write per call.")

    @field_validator("max_chars")
    @classmethod
    def _above_min_chars(cls, max_chars: int, info: ValidationInfo) -> int:
        if info.data.get("min_chars", 1) > max_chars:  # no query could pass: each would take the fallback, unsaid
            raise ValueError(f"max_chars {max_chars} is less than min_chars {info.data['min_chars']}: no generated "
                             "query could be kept")
        return max_chars


class QueryRewriter(LLMStep):
    """Base of the query operators (not registered: it has no name); subclasses give ``candidates``."""

    scope: ClassVar[str] = "row"
    Params: ClassVar[type[RewriteParams]] = RewriteParams
    #: The query's metadata this step writes: the queries it kept and how many lines of the replies each check
    #: left out (``{"kept": [...], "left_out": {"too similar": 2}}``); one key an operator, so two rewriters of a
    #: flow each keep theirs.
    metadata_key: ClassVar[str]

    def reads(self) -> list[str]:
        """Besides the query, what an earlier step wrote of it and a row keeps (``original_qid``, ``original_query``:
        ``query.contextualize``'s question as asked; ``query_source``): a row's cached output is keyed by these, and
        one keyed without them gave a follow-up the question another conversation asked."""
        return ["qid", self.params.query_column, EXTRA_QUERIES, "original_qid", "original_query", "query_source"]

    def requires(self) -> list[str]:
        return ["qid", self.params.query_column]  # extra_queries only after another rewriter

    def metadata_keys(self) -> frozenset[str]:
        return frozenset({self.metadata_key})

    def produces(self) -> dict[str, str]:
        # qid and the query are declared too: the added rows rewrite them, and a cache hit must bring them back
        # original_query: fuse.expanded_queries gives a merged row its original's text, also when the original
        # query found nothing and only its extra queries' rows are there
        return {"qid": "id", self.params.query_column: "data", "original_qid": "id", "original_query": "data",
                "query_source": "data", EXTRA_QUERIES: "data"}

    def candidates(self, queries: dict[str, str]) -> dict[str, list[tuple[str, Completion | LLMError]]]:
        """Per qid, the model's replies, each with the ``query_source`` its queries get."""
        raise NotImplementedError

    def split(self, text: str) -> list[str]:
        """The queries in one reply: one per line, list marks and quotes removed."""
        lines = (LIST_MARK.sub("", line).strip().strip("\"'`").strip() for line in text.splitlines())
        return [line for line in lines if line and not line.endswith(":")]

    def reply_queries(self, reply: Completion) -> list[str]:
        """``split`` of a reply, less its last line when ``max_tokens`` cut it there (``which insects besides bees
        produce hon`` is not a query)."""
        text = reply.text
        if reply.finish_reason == "length" and not text.endswith("\n"):
            text = text.rpartition("\n")[0]
        return self.split(text)

    def transform(self, table: pa.Table) -> pa.Table:
        require_columns(table, self.requires(), op=self.name, step=self.step_id)
        rows = table.to_pylist()
        queries = {str(row["qid"]): str(row[self.params.query_column] or "") for row in rows}
        if len(queries) != len(rows):
            # the step placed after a retriever: the spec's to change (a 422 over HTTP), not a failure of the step
            raise MissingColumnsError("each qid must appear once (a queries table, before retrieval): put this step "
                                      "before the retrievers", op=self.name, step=self.step_id, field="qid")
        # After another rewriter, only the questions asked are rewritten (one call each, as documented), and what
        # that one added counts as seen: its rows pass as they are.
        asked = {str(row["qid"]): queries[str(row["qid"])] for row in rows
                 if (row.get("query_source") or "original") == "original"}
        added: dict[str, list[str]] = {qid: list(row.get(EXTRA_QUERIES) or []) for row in rows
                                       if (qid := str(row["qid"])) in asked}
        for row in rows:  # the rows of this batch an earlier rewriter added (also listed by the column)
            origin = str(row.get("original_qid") or row["qid"])
            if str(row["qid"]) not in asked and queries[str(row["qid"])] not in added.setdefault(origin, []):
                added[origin].append(queries[str(row["qid"])])
        wanted = {qid: text for qid, text in asked.items() if text.strip()}  # an empty question is not sent
        replies = self.candidates(wanted) if wanted else {}
        out: list[dict[str, Any]] = []
        for row in rows:
            qid = str(row["qid"])
            if qid not in asked:
                out.append(row)
                continue
            origin, original = row.get("original_qid") or qid, row.get("original_query") or queries[qid]
            row = {**row, "original_qid": origin, "original_query": original}
            earlier = added.get(qid, [])
            extra = self._kept(qid, queries[qid], replies.get(qid, []), earlier)
            out.append({**row, "query_source": "original", EXTRA_QUERIES: earlier + [text for _, text in extra]})
            # past the qids of this batch and those of the extra queries the row lists (qid#1..qid#n)
            taken = {*queries, *(f"{qid}#{n}" for n in range(1, len(earlier) + 1))}
            out += [{**row, "qid": new_qid, self.params.query_column: text, "original_qid": origin,
                     "query_source": source, EXTRA_QUERIES: None}
                    for new_qid, (source, text) in zip(_unused_qids(qid, len(extra), taken), extra)]
        schema = table.schema
        for column in self.produces():
            if column not in schema.names:
                kind = pa.list_(pa.string()) if column == EXTRA_QUERIES else pa.string()
                schema = schema.append(pa.field(column, kind))
        return pa.Table.from_pylist(out, schema=schema)

    def _kept(self, qid: str, query: str, replies: list[tuple[str, Completion | LLMError]],
              earlier: list[str] = ()) -> list[tuple[str, str]]:
        """The valid, novel queries of ``replies`` (novel against ``query`` and the ``earlier`` rewriters' ones), or
        the fallback; they and the count of lines each check left out go to the query's metadata."""
        left_out: Counter[str] = Counter()
        if query.strip():
            kept = self._choose(qid, query, replies, earlier, left_out)
        else:
            kept = []
            self.degrade(qid, "the question is empty: nothing to rewrite, so the model was not called")
        self.emit_metadata(qid, self.metadata_key, {"kept": [text for _, text in kept], "left_out": dict(left_out)})
        return kept

    def _choose(self, qid: str, query: str, replies: list[tuple[str, Completion | LLMError]], earlier: list[str],
                left_out: Counter[str]) -> list[tuple[str, str]]:
        kept: list[tuple[str, str]] = []
        seen = [_tokens(query), *map(_tokens, earlier)]
        problems = []
        for source, reply in replies:
            problem = junk_reason(reply)
            if problem:
                problems.append(problem)
                continue
            for text in self.reply_queries(reply):
                why = self._left_out(text, seen, len(kept))
                if why:
                    left_out[why] += 1
                    continue
                kept.append((source, text))
                seen.append(_tokens(text))
        failing = self.params.on_error == "error"  # the step fails: nothing is kept, no fallback written, nor said
        if kept:
            if problems:  # some calls failed: the queries they would have given are missing (and not cached)
                others = "" if failing else ", the others' queries kept"
                self.degrade(qid, f"{len(problems)} of {len(replies)} calls failed{others}: {problems[0]}")
            return kept
        reason = problems[0] if problems else "the model returned no valid query"
        fallback = self.fallback_query(query)
        if self.params.fallback == "keywords" and fallback and not failing:
            if _novel(fallback, seen, self.params):  # (an earlier rewriter's fallback was the same words)
                self.degrade(qid, f"{reason}; the question's keywords are the extra query")
                return [("fallback_keywords", fallback)]
            reason += "; the keywords fallback was left out, being the question's own words or an earlier query's"
        self.degrade(qid, reason)
        return []

    def fallback_query(self, query: str) -> str:
        """The extra query when the model gives none: the question's keywords (``query.keywords`` keeps ``count``)."""
        return keywords_of(query)

    def _left_out(self, text: str, seen: list[set[str]], kept: int) -> str | None:
        """Why a line of the model's reply is not kept (None: it is): the checks' reasons, as the query's metadata
        counts them (``left_out``), so that ``similarity_threshold`` or ``max_chars`` can be tuned on what they cut."""
        p = self.params
        words = _WORD.findall(text.lower())
        if not p.min_chars <= len(text) <= p.max_chars:
            return "too short" if len(text) < p.min_chars else "too long"
        if len(words) < p.min_words or not any(ch.isalpha() for ch in text) or _loops(words):
            return "not a query"
        if not _novel(text, seen, self.params):
            return "too similar"
        return "over max_queries" if kept >= p.max_queries else None


def _loops(words: list[str]) -> bool:
    """A small model's loop, not a query: four words or more, at most half of them different ('A: A: A: A: ...'
    passed as a query; ``repetition`` needs 40 words)."""
    return len(words) >= 4 and len(set(words)) * 2 <= len(words)


def _unused_qids(qid: str, count: int, taken: Container[str]) -> list[str]:
    """``count`` qids ``qid#1``, ``qid#2``, ... that no row of the table has: a step after another rewriter
    numbers past the rows that one added."""
    found, n = [], 0
    while len(found) < count:
        n += 1
        if f"{qid}#{n}" not in taken:
            found.append(f"{qid}#{n}")
    return found


def keywords_of(text: str) -> str:
    """The words of ``text`` less English stopwords, in order, each once (the non-LLM fallback). Snowball's 179
    stopwords: the ISO list's 1,298 hold words a question is about (big, young, older, million, state, world, uk)."""
    from operators.preprocess.stopwords import stopword_set

    stop = stopword_set("en", "snowball")
    words = [w for w in _WORD.findall(text.lower()) if w not in stop]
    return " ".join(dict.fromkeys(words))


def _tokens(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _novel(text: str, seen: list[set[str]], params: RewriteParams) -> bool:
    words = _tokens(text)
    return all(len(words & other) / max(len(words | other), 1) < params.similarity_threshold for other in seen)
