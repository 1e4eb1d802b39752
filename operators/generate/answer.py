"""Grounded answers: a language model answers each query from its numbered context and cites it."""

from __future__ import annotations

import re
from typing import Any, ClassVar

import pyarrow as pa
from pydantic import Field

from operators.llm import LLMParams, LLMStep, junk_reason
from operators.llm.gateway import Completion
from operators.tables import concat, qid_groups, set_column

_LABEL = re.compile(r"^\s*\**\s*(answer|reasoning|sources?|references?|citations?)\s*\**\s*:\s*", re.I | re.M)
_CITATION = re.compile(r"\[\s*(?:doc(?:ument)?s?\.?\s*)?(\d+(?:\s*(?:,|and|-)\s*(?:doc(?:ument)?\s*)?\d+)*)\s*\]", re.I)


class AnswerGenerator(LLMStep):
    """Answer each query from its context (generate.context) with a language model, citing its documents.

    One call per query. The prompt gives the numbered documents and asks for a short
    answer that cites them as ``[1]``, ``[2]``, an optional reasoning line and a
    ``Sources:`` line. Into the query's metadata go ``answer`` (citations written
    ``[i]``), ``reasoning`` (empty when the model gave none), ``sources`` (the docnos
    of the documents cited, in the order first cited; numbers outside the context are
    ignored), ``raw_response`` and ``usage`` (tokens and seconds, by step). Every row is
    kept; ``cited_column`` says whether the answer cited it. A failed call or an empty
    reply degrades the query (no answer, rows unchanged, ``degraded`` in its metadata).
    Prompt fields: ``{query}``, ``{context}``.

    Usage::

        AnswerGenerator({"model": "local", "max_tokens": 128})(ContextBuilder()(results))
    """

    name = "generate.answer"
    aliases = ("generate_answer",)
    scope = "query"

    system_prompt: ClassVar[str] = (
        "You answer questions using only the numbered documents you are given. Cite every document you use by "
        "its number in square brackets, like [1]. If the documents do not answer the question, say so.")
    prompt_template: ClassVar[str] = (
        "Documents:\n{context}\n\nQuestion: {query}\n\n"
        "Write a short answer that cites the documents it uses, like [1]. End with a line 'Sources:' and the "
        "numbers of the documents you used.")
    prompt_fields: ClassVar[tuple[str, ...]] = ("query", "context")

    class Params(LLMParams):
        context_column: str = Field("context", description="Column holding the query's context (generate.context).")
        index_column: str = Field("context_index", description="Column holding each row's document number.")
        cited_column: str = Field("cited", description="Column that receives whether the answer cited the row.")

    def reads(self) -> list[str]:
        return ["qid", "query", "docno", self.params.context_column, self.params.index_column]

    def produces(self) -> dict[str, str]:
        return {self.params.cited_column: "data"}

    def transform(self, table: pa.Table) -> pa.Table:
        p = self.params
        if table.num_rows == 0:
            return set_column(table, p.cited_column, pa.array([], pa.bool_()))
        groups = dict(qid_groups(table))
        prompts = {qid: self.render(query=rows.column("query")[0].as_py() or "",
                                    context=rows.column(p.context_column)[0].as_py() or "")
                   for qid, rows in groups.items()}
        replies = self.ask(prompts)
        out = []
        for qid, rows in groups.items():
            numbers = rows.column(p.index_column).to_pylist()
            reply = replies[qid]
            problem = junk_reason(reply)
            cited: list[int] = []
            if problem is None:
                parsed = parse_answer(reply.text, len([n for n in numbers if n is not None]))
                if not re.search(r"\w", parsed["answer"]):
                    problem = "the reply has no answer, only labels or citations"
            if problem is not None:
                if isinstance(reply, Completion):
                    self.emit_metadata(qid, "raw_response", reply.text)
                self.degrade(qid, problem)
            else:
                docnos = dict(zip(numbers, rows.column("docno").to_pylist()))
                cited = parsed["sources"]
                self.emit_metadata(qid, "answer", parsed["answer"])
                self.emit_metadata(qid, "reasoning", parsed["reasoning"])
                self.emit_metadata(qid, "sources", [docnos[n] for n in cited if n in docnos])
                self.emit_metadata(qid, "raw_response", reply.text)
            out.append(set_column(rows, p.cited_column, pa.array([n in cited for n in numbers], pa.bool_())))
        return concat(out)


def parse_answer(text: str, documents: int) -> dict[str, Any]:
    """Answer, reasoning and cited document numbers (1..``documents``, first-cited order) from a reply."""
    pieces = _LABEL.split(text)
    sections: dict[str, str] = {}
    for label, body in zip(pieces[1::2], pieces[2::2]):
        key = label.lower() if label.lower() in ("answer", "reasoning") else "sources"
        sections[key] = (sections.get(key, "") + "\n" + body).strip()
    sections["answer"] = sections.get("answer") or pieces[0]  # no "Answer:" label: the text before any label
    answer = sections.get("answer", "").strip()
    numbers: list[int] = []
    for match in _CITATION.finditer(answer + "\n" + sections.get("reasoning", "")):
        numbers += [int(n) for n in re.findall(r"\d+", match.group(1))]
    numbers += [int(n) for n in re.findall(r"\d+", sections.get("sources", ""))]
    cited = list(dict.fromkeys(n for n in numbers if 1 <= n <= documents))
    answer = _CITATION.sub(lambda m: "[" + ", ".join(re.findall(r"\d+", m.group(1))) + "]", answer)
    return {"answer": answer.strip(), "reasoning": sections.get("reasoning", "").strip(), "sources": cited}
