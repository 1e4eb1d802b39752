"""Grounded answers: a language model answers each query from its numbered context and cites it."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, model_validator

from operators.conversation import NO_ANSWER
from operators.errors import see_docs
from operators.generate import short_answer
from operators.generate.attribution import attribute, containing
from operators.generate.answer_stream import ANSWER_OP, AnswerStreams, answer_sink
from operators.llm import LLMParams, LLMStep, junk_reason, repetition
from operators.llm.gateway import Completion
from operators.tables import concat, qid_groups, set_column

_LABEL = re.compile(r"^\s*\**\s*(answer|reasoning|sources?|references?|citations?)\s*\**\s*:\s*", re.I | re.M)
#: A sources label written on the answer's own line, after a sentence or a citation ("Bees make honey. Sources:
#: [1]"): read as a section of its own, as on a line of its own (it stayed in the answer).
_INLINE_SOURCES = re.compile(r"(?<=[.!?\]])[ \t]+\**\s*((?:sources?|references?|citations?)\s*\**\s*:)", re.I)
#: A citation the reply's end cut open ("honey [1"): no part of the answer.
_CUT_CITATION = re.compile(r"\s*\[[^\]]*$")
_CITATION = re.compile(r"\[\s*(?:doc(?:ument)?s?\.?\s*)?(\d+(?:\s*(?:,|and|-)\s*(?:doc(?:ument)?\s*)?\d+)*)\s*\]", re.I)


class AnswerGenerator(LLMStep):
    """Answer each query from its context (generate.context) with a language model, citing its documents.

    One call per query. The prompt gives the numbered documents and asks for a short
    answer that cites them as ``[1]``, ``[2]``; ``Answer:``, ``Reasoning:`` and
    ``Sources:`` sections are read when the model writes them. Into the query's metadata
    go ``answer`` (citations written ``[i]``), ``reasoning`` (empty when the model gave
    none), ``sources`` (the docnos of the documents cited, in the order first cited;
    numbers outside the context are ignored), ``sources_from`` (``citations``, or
    ``overlap`` when the reply cited nothing and the sources were attributed by the answer's
    distinctive words, see ``attribute_uncited`` and ``attribution``; ``span`` for a short answer found in the
    documents;
    ``none`` without documents), ``raw_response``, ``finish_reason`` (the model's: ``length`` when
    ``max_tokens`` cut the reply), ``answer_cut`` (whether that cut fell in the answer itself rather than in what
    the model wrote after it: the function ``answer_cut``) and ``usage`` (tokens and seconds, by step). Every row is
    kept; ``cited_column`` says whether it is a source. A failed call, an empty reply, a reply with nothing
    but citations, one that repeats the same lines, or a short answer that is the example turns' own and in no
    document degrades the query (no answer, rows unchanged, ``degraded`` in its
    metadata). Prompt fields: ``{query}``, ``{context}``. With ``context_column: null`` the
    model answers from the question alone (``closed_book_*`` prompts), the baseline that
    says what retrieval adds. ``style: short`` asks for the answer span alone (a name, a
    date, yes or no: what EM/F1 against short gold answers measure; ``short_answer``) and
    attributes the sources to the documents that contain it (by distinctive words, as above, when none holds it
    as written: the model reworded it or ``max_tokens`` cut it off). With ``min_relevance``, a query none of whose
    rows is that close to the question (``relevance_column``, the dense retriever's cosine by default) gets
    ``no_answer`` as its answer without a model call, and ``abstained`` in its metadata (``relevance``: its
    best row's), rather than an answer a small model makes up from passages about something else.

    Usage::

        AnswerGenerator({"model": "local", "max_tokens": 128})(ContextBuilder()(results))
    """

    name = ANSWER_OP
    aliases = ("generate_answer",)
    scope = "query"
    version = "17"  # 2: sources by word overlap for a short answer; 3: its leading article kept, loops within a line;
    # 4: a short answer that repeats an example turn's answer no document holds degrades; 5: sources by distinctive
    # words (not the question's), weighted by rarity, with a phrase or a rare word in the document (attribution);
    # 6: a reply that falls into a loop after a sound start is junk too; 7: so is a short one, a sentence 3 times;
    # 8: answer_cut; 9: a short answer keeps a title's small first word ("To Kill a Mockingbird"); 10: and the name
    # its lowercase last word qualifies ("northern France"); 11: min_relevance
    # 12: a follow-up's answer is read against the question as asked (question_column), not its history form
    # 13: a Sources: label after the answer's last sentence is read as the sources section; a cut-open [1 dropped
    # 14: the question as asked from a row that has it (not a retrieve.messages row ranked first)
    # 15: a short answer's words count as the question's by their stem, and its span does not stop mid-phrase
    # 16: an empty question, or a context with no document text in it, is not sent: the query is marked degraded
    # 17: a Chinese or Japanese answer's sources: its pairs of characters, a span inside a document's clause

    system_prompt: ClassVar[str] = (
        "You answer questions using only the numbered documents you are given. Cite every document you use by "
        "its number in square brackets, like [1]. If the documents do not answer the question, say so.")
    prompt_template: ClassVar[str] = (
        "Documents:\n{context}\n\nQuestion: {query}\n\n"
        "Answer in one or two sentences and cite the documents you use, like [1].")
    prompt_fields: ClassVar[tuple[str, ...]] = ("query", "context")
    #: The prompts without documents (``context_column: null``): the model's own knowledge, a baseline.
    closed_book_system_prompt: ClassVar[str] = "You answer questions briefly and factually."
    closed_book_template: ClassVar[str] = "Question: {query}\n\nAnswer in one or two sentences."

    class Params(LLMParams):
        context_column: str | None = Field("context", description="Column holding the query's context "
                                           "(generate.context); null: answer from the question alone (one row "
                                           "per query, no sources: the no-retrieval baseline, answer_only).")
        index_column: str = Field("context_index", description="Column holding each row's document number.")
        text_column: str = Field("text", description="Column holding each document's text (attribute_uncited).")
        question_column: str = Field("original_query", description="Column holding the question as asked "
                                     "(query.contextualize's original_column), against which the answer is read: "
                                     "its words are no evidence of a source, and a short answer's restatement "
                                     "of it is cut; the query column where it is absent (the model is asked the "
                                     "query).")
        cited_column: str = Field("cited", description="Column that receives whether the answer cited the row.")
        attribute_uncited: bool = Field(True, description="When the reply cites no document (small models often "
                                        "do not), take as sources the documents that hold the answer's "
                                        "distinctive words (those the question does not hold, stopwords aside; "
                                        "at least min_overlap of them, weighted by rarity, and a phrase of them "
                                        "or a rare one; at most 3); the query's sources_from says 'overlap' "
                                        "instead of 'citations'.")
        min_overlap: float = Field(0.3, gt=0, le=1, description="Share of the answer's distinctive words, each "
                                   "weighted by its inverse document frequency across the context, a document "
                                   "must hold to be attributed (attribute_uncited).")
        style: Literal["sentences", "short"] = Field("sentences", description="'sentences': one or two sentences "
                                                     "that cite the documents; 'short': the answer span alone (a "
                                                     "few words, no citations; give a small max_tokens), sources "
                                                     "by the documents that contain it. The prompt and "
                                                     "system_prompt params replace either style's.")
        min_relevance: float | None = Field(None, description="Answer only a query with a row whose "
                                            "relevance_column reaches this; any other gets no_answer, without a "
                                            "model call, no sources, and abstained: true in its metadata. The "
                                            "scale is relevance_column's: rag sets 0.45 for MiniLM's cosine, "
                                            f"see {see_docs('results')}; null: answer every query.")
        relevance_column: str = Field("score_dense", description="Column holding how close each row is to the "
                                      "question (min_relevance): fuse.rrf keeps the dense retriever's cosine as "
                                      "score_dense; a row without one (found by BM25 alone) counts as not close.")
        no_answer: str = Field(NO_ANSWER, min_length=1,
                               description="The answer of a query below min_relevance.")

        @model_validator(mode="after")
        def _relevance_needs_documents(self):
            if self.min_relevance is not None and self.context_column is None:
                raise ValueError("min_relevance reads the query's documents, and context_column: null answers "
                                 "without any: set one of them")
            return self

    def reads(self) -> list[str]:
        return self.requires() + ([self.params.question_column] if self.params.context_column is None else
                                  [self.params.text_column, self.params.question_column])

    def requires(self) -> list[str]:
        if self.params.context_column is None:
            return ["qid", "query"]
        gate = [] if self.params.min_relevance is None else [self.params.relevance_column]
        return ["qid", "query", "docno", self.params.context_column, self.params.index_column, *gate]

    def prompts(self) -> dict[str, str]:
        p = self.params
        closed_book, short = p.context_column is None, p.style == "short"
        if not (closed_book or short):
            return super().prompts()
        system, template = {(True, False): (self.closed_book_system_prompt, self.closed_book_template),
                            (False, True): (short_answer.SYSTEM, short_answer.TEMPLATE),
                            (True, True): (short_answer.CLOSED_BOOK_SYSTEM, short_answer.CLOSED_BOOK_TEMPLATE),
                            }[closed_book, short]
        return {"system": p.system_prompt if p.system_prompt is not None else system,
                "prompt": p.prompt if p.prompt is not None else template}

    def render(self, **fields: Any) -> list[dict[str, Any]]:
        messages = super().render(**fields)
        if self.params.style != "short":
            return messages
        examples = short_answer.example_turns(self.params.context_column is None)
        return messages[:-1] + examples + messages[-1:]

    def cache_identity(self) -> dict[str, Any]:
        identity = super().cache_identity()
        if self.params.style == "short":
            identity["examples"] = short_answer.example_turns(self.params.context_column is None)
        return identity

    def produces(self) -> dict[str, str]:
        return {self.params.cited_column: "data"}

    def metadata_keys(self) -> frozenset[str]:
        return frozenset({"answer", "reasoning", "sources", "sources_from", "raw_response", "finish_reason",
                          "answer_cut", "abstained", "relevance", "documents"})

    def no_rows_metadata(self) -> dict[str, Any]:
        """A question none of whose documents reached the step (its search found nothing: an empty index, a filter
        that matches none) is declined as ``min_relevance`` declines one, with ``documents: 0`` (no model call: the
        executors record it, ``Operator.no_rows_metadata``). Closed book, each query is its own row: none."""
        if self.params.context_column is None:
            return {}
        return {**self._declined(), **({} if self.params.min_relevance is None else {"relevance": None}),
                "documents": 0}

    def transform(self, table: pa.Table) -> pa.Table:
        p = self.params
        if table.num_rows == 0:
            return set_column(table, p.cited_column, pa.array([], pa.bool_()))
        groups = dict(qid_groups(table))
        closed_book = p.context_column is None
        queries = {qid: rows.column("query")[0].as_py() or "" for qid, rows in groups.items()}
        # the question as asked, not its history form: from a row that has it (retrieve.messages' rows do not)
        asked = {qid: _given(rows, p.question_column) or queries[qid] for qid, rows in groups.items()}
        contexts = {qid: "" if closed_book else rows.column(p.context_column)[0].as_py() or ""
                    for qid, rows in groups.items()}
        abstaining = self._abstaining(groups)
        # not sent, each query marked degraded with its reason: nothing asked, or nothing to answer from (every row
        # cut by generate.context's budget, or rows without text: the model answered from its own knowledge)
        unsent = {qid: "the question is empty: nothing to answer, so the model was not called"
                  for qid, query in queries.items() if not query.strip()}
        for qid in groups:
            if not closed_book and qid not in unsent and not contexts[qid].strip():
                unsent[qid] = (f"the context ({p.context_column}) holds no document text: nothing to answer from, "
                               "so the model was not called")
        prompts = {qid: self.render(query=queries[qid], context=contexts[qid]) for qid in groups
                   if qid not in abstaining and qid not in unsent}
        streams = self._streams({qid: 0 if closed_book else rows.num_rows for qid, rows in groups.items()})
        replies = self.ask(prompts, on_text=None if streams is None else streams.feed)
        out = []
        for qid, rows in groups.items():
            numbers = [None] * rows.num_rows if closed_book else rows.column(p.index_column).to_pylist()
            if qid in abstaining:
                self._abstain(qid, streams)
                out.append(set_column(rows, p.cited_column, pa.array([False] * rows.num_rows, pa.bool_())))
                continue
            if qid in unsent:
                self.degrade(qid, unsent[qid])
                out.append(set_column(rows, p.cited_column, pa.array([False] * rows.num_rows, pa.bool_())))
                continue
            reply = replies[qid]
            problem = junk_reason(reply)
            cited: list[int] = []
            if problem is None:
                shown = len([n for n in numbers if n is not None])  # the documents the context numbers
                parsed = parse_answer(reply.text, shown)
                if p.style == "short":
                    parsed = {"answer": short_answer.short_span(parsed["answer"], asked[qid]),
                              "reasoning": parsed["reasoning"], "sources": []}
                problem = _junk_answer(parsed["answer"])
                if problem is None and p.style == "short" and not closed_book:
                    problem = short_answer.echoed_example(parsed["answer"], contexts[qid])
                if problem is None and p.style == "short":
                    problem = short_answer.echoed_example_topic(parsed["answer"], asked[qid], contexts[qid],
                                                                closed_book)
            if problem is not None:
                if isinstance(reply, Completion):
                    self.emit_metadata(qid, "raw_response", reply.text)
                self.degrade(qid, problem)
            else:
                docnos = {} if closed_book else dict(zip(numbers, rows.column("docno").to_pylist()))
                cited, sources_from = parsed["sources"], "none" if closed_book else "citations"
                if not cited and p.attribute_uncited and not closed_book:
                    texts = dict(zip(numbers, rows.column(p.text_column).to_pylist())) \
                        if p.text_column in rows.column_names else {}
                    answer, question = parsed["answer"], asked[qid]
                    if p.style != "short":
                        cited, sources_from = attribute(answer, texts, p.min_overlap, question), "overlap"
                    else:  # the documents that hold it verbatim; if none (reworded, cut off), those sharing its words
                        cited, sources_from = containing(answer, texts, question), "span"
                        if not cited and (by_words := attribute(answer, texts, p.min_overlap, question)):
                            cited, sources_from = by_words, "overlap"
                if streams is not None:  # the last word, held back while it could still grow
                    streams.finish(qid, parsed["answer"])
                self.emit_metadata(qid, "sources_from", sources_from if cited else "none")
                self.emit_metadata(qid, "answer", parsed["answer"])
                self.emit_metadata(qid, "reasoning", parsed["reasoning"])
                self.emit_metadata(qid, "sources", [docnos[n] for n in cited if n in docnos])
                self.emit_metadata(qid, "raw_response", reply.text)
                self.emit_metadata(qid, "finish_reason", reply.finish_reason)
                self.emit_metadata(qid, "answer_cut", answer_cut(reply.text, reply.finish_reason, p.style == "short",
                                                                  parsed["answer"]))
                if parsed.get("stray") and not closed_book:  # the right form, the wrong numbers: said, not hidden
                    self.degrade(qid, f"the reply cites {parsed['stray']}, but the context has {shown} "
                                      "documents (those citations have no source)", keeps="its answer")
            out.append(set_column(rows, p.cited_column, pa.array([n in cited for n in numbers], pa.bool_())))
        return concat(out)

    def _abstaining(self, groups: dict[str, pa.Table]) -> set[str]:
        """The queries below ``min_relevance``, each one's best relevance recorded (for all, when it is set)."""
        p, below = self.params, set()
        if p.min_relevance is None:
            return below
        for qid, rows in groups.items():
            best = pc.max(rows.column(p.relevance_column).cast(pa.float64())).as_py()
            self.emit_metadata(qid, "relevance", best)
            if best is None or best < p.min_relevance:
                below.add(qid)
        return below

    def _abstain(self, qid: str, streams: AnswerStreams | None) -> None:
        if streams is not None:
            streams.finish(qid, self.params.no_answer)
        for key, value in self._declined().items():
            self.emit_metadata(qid, key, value)

    def _declined(self) -> dict[str, Any]:
        """The metadata of a declined question: the no-answer text, no sources, ``abstained``."""
        return {"answer": self.params.no_answer, "reasoning": "", "sources": [], "sources_from": "none",
                "abstained": True, "answer_cut": False}

    def _streams(self, documents: dict[str, int]) -> AnswerStreams | None:
        """Each query's reply read as an answer as it is written, for the chat's sink (``answer_stream``); None when
        nobody waits, or the style rewrites the answer at the end."""
        sink = answer_sink()
        if sink is None or self.params.style != "sentences":
            return None
        return AnswerStreams(sink, {qid: (lambda reply, count=count: parse_answer(reply, count)["answer"])
                                    for qid, count in documents.items()})


def _junk_answer(answer: str) -> str | None:
    """Why a parsed answer is junk: not a letter or digit beside citations, or a small model's loop (``repetition``,
    which the summaries check too); None if it is an answer ("Yes.", "1945" are answers)."""
    if not re.search(r"[^\W_]", re.sub(r"\[[\d,\s]*\]", " ", answer)):
        return "the reply has no answer, only labels or citations"
    return repetition(answer)


def _given(rows: pa.Table, column: str) -> str | None:
    """The query's first value in ``column`` that is set (None: none, or no such column)."""
    given = pc.drop_null(rows.column(column)) if column in rows.column_names else []
    return given[0].as_py() if len(given) else None


def answer_cut(text: str, finish_reason: str | None, short: bool, span: str = "") -> bool:
    """Whether ``max_tokens`` cut the answer itself, not only what the model wrote after it: a ``Reasoning:`` or
    ``Sources:`` section, or the lines after a short answer (``short``: its reply's first line), or the sentences
    after the one that holds a short answer's ``span`` (the part of that line it shows). SmolLM2 asked for a short
    answer writes "Arachnids make honey.\n\nArachneidae is a family", or "Photosynthesis is the process by which
    plants convert light energy into chemical energy. It", and is stopped there: its answer is whole, and a reader
    told it was cut off would look for the rest."""
    if finish_reason != "length":
        return False
    pieces = _LABEL.split(_sections_on_lines(text))
    if len(pieces) > 1 and pieces[-2].lower() != "answer":
        return False  # a section after the answer's: the cut fell there
    if short and span and (at := text.find(span)) >= 0 and re.search(r"[.!?](\s|$)", text[at + len(span):]):
        return False  # the span's sentence ended: the cut fell after the answer shown
    return not (short and "\n" in pieces[-1].lstrip())  # a short answer's line that ended


def _sections_on_lines(text: str) -> str:
    """``text`` with a sources label written after a sentence of the answer moved to a line of its own."""
    return _INLINE_SOURCES.sub(lambda m: "\n" + m.group(1) + " ", text)


def parse_answer(text: str, documents: int) -> dict[str, Any]:
    """Answer, reasoning and cited document numbers (1..``documents``, first-cited order) from a reply; ``stray``:
    the numbers it cites that are not documents of the context."""
    pieces = _LABEL.split(_sections_on_lines(text))
    sections: dict[str, str] = {}
    for label, body in zip(pieces[1::2], pieces[2::2]):
        key = label.lower() if label.lower() in ("answer", "reasoning") else "sources"
        sections[key] = (sections.get(key, "") + "\n" + body).strip()
    sections["answer"] = sections.get("answer") or pieces[0]  # no "Answer:" label: the text before any label
    answer = _CUT_CITATION.sub("", sections.get("answer", "").strip())
    numbers: list[int] = []
    for match in _CITATION.finditer(answer + "\n" + sections.get("reasoning", "")):
        numbers += [int(n) for n in re.findall(r"\d+", match.group(1))]
    numbers += [int(n) for n in re.findall(r"\d+", sections.get("sources", ""))]
    cited = list(dict.fromkeys(n for n in numbers if 1 <= n <= documents))
    answer = _CITATION.sub(lambda m: "[" + ", ".join(re.findall(r"\d+", m.group(1))) + "]", answer)
    return {"answer": answer.strip(), "reasoning": sections.get("reasoning", "").strip(), "sources": cited,
            "stray": sorted({n for n in numbers if not 1 <= n <= documents})}
