"""One summary per query of the documents that remain after retrieval and reranking (mosaicRAG's results
summarizer), into the query's metadata."""

from __future__ import annotations

from typing import ClassVar

import pyarrow as pa
from pydantic import Field, field_validator

from operators.llm import LLMParams, LLMStep, junk_reason, repetition
from operators.step_notes import SHARED_METADATA
from operators.summarize._cut import finished
from operators.tables import in_rank_order, qid_groups
from operators.unicode import whole_characters


class ResultsSummarizer(LLMStep):
    """Summarise each query's remaining documents into one text, the query's `summary` metadata (one call per query).

    The prompt gives the question and the query's first ``max_documents`` rows in rank
    order, each as ``[i] title`` and its text cut to ``max_document_chars`` characters,
    and asks for a summary that answers the question from them only. Rows pass through
    unchanged. A failed call or a junk reply (no text, or a loop: the same lines or words over and over,
    ``repetition``, as for ``generate.answer``) leaves the query without a summary and marks it degraded.
    ``<output_key>_finish_reason`` holds the model's finish reason (``length`` when ``max_tokens`` cut the reply, as
    ``generate.answer``'s ``finish_reason``); a cut summary is trimmed to its last whole sentence, and
    ``<output_key>_cut`` says so (absent when the reply was not cut).
    Prompt fields: ``{query}``, ``{documents}``.

    Usage::

        ResultsSummarizer({"model": "local", "max_documents": 3})(results)   # metadata[qid]["summary"]
    """

    name = "summarize.results"
    aliases = ("ResultsSummarizerStep",)
    scope = "query"
    version = "4"  # 2: a summary that loops degrades the query (it was kept as the summary); 3: its finish reason,
    # a summary cut at max_tokens trimmed to its last whole sentence; 4: a Chinese or
    # Japanese summary cut at max_tokens trimmed at its 。！？ (it was kept whole, "no whole sentence")

    system_prompt: ClassVar[str] = (
        "You are part of a search engine. Summarise the documents you are given so that the summary answers the "
        "question. Use only what the documents say. Write at most five sentences and no lists.")
    prompt_template: ClassVar[str] = "Question: {query}\n\nDocuments:\n{documents}\n\nSummary:"
    prompt_fields: ClassVar[tuple[str, ...]] = ("query", "documents")
    prompt_required: ClassVar[tuple[str, ...]] = ("documents",)

    class Params(LLMParams):
        max_tokens: int = Field(200, gt=0, le=32768, description="Most tokens the model may write per summary.")
        input_column: str = Field("text", description="Column holding each document's text.")
        title_column: str | None = Field("title", description="Column holding the title put before each text "
                                         "(left out when absent or empty); null: no titles.")
        max_documents: int = Field(5, gt=0, description="Most documents of a query given to the model, best "
                                   "ranked first.")
        max_document_chars: int = Field(1000, gt=0, description="Each document's text is cut to this many "
                                        "characters.")
        output_key: str = Field("summary", min_length=1, description="Key of the query's metadata that receives "
                                "the summary (not `usage` or `degraded`, which every step adds to).")

        @field_validator("output_key")
        @classmethod
        def _not_shared(cls, key: str) -> str:
            if key in SHARED_METADATA:
                raise ValueError(f"'{key}' is the metadata every step adds to ({', '.join(sorted(SHARED_METADATA))}):"
                                 " the summary would replace it; give another key")
            return key

    def reads(self) -> list[str]:
        return ["qid", "query", self.params.input_column] + ([self.params.title_column]
                                                             if self.params.title_column else [])

    def requires(self) -> list[str]:
        return ["qid", "query", self.params.input_column]

    def metadata_keys(self) -> frozenset[str]:
        key = self.params.output_key
        return frozenset({key, f"{key}_finish_reason", f"{key}_cut"})

    def transform(self, table: pa.Table) -> pa.Table:
        groups = dict(qid_groups(table)) if table.num_rows else {}
        prompts = {qid: self.render(query=rows.column("query")[0].as_py() or "", documents=self.documents(rows))
                   for qid, rows in groups.items()}
        for qid, reply in self.ask(prompts).items():
            problem = junk_reason(reply) or repetition(reply.text)
            if problem is None:
                key = self.params.output_key
                summary, cut = finished(reply)
                self.emit_metadata(qid, key, summary)
                self.emit_metadata(qid, f"{key}_finish_reason", reply.finish_reason)
                if cut is not None:
                    self.emit_metadata(qid, f"{key}_cut", cut)
            else:
                self.degrade(qid, problem)
        return table

    def documents(self, rows: pa.Table) -> str:
        """The query's best ``max_documents`` rows as numbered blocks, in rank order."""
        p = self.params
        rows = in_rank_order(rows)
        rows = rows.slice(0, p.max_documents)
        titles = (rows.column(p.title_column).to_pylist() if p.title_column and p.title_column in rows.column_names
                  else [None] * rows.num_rows)
        blocks = []
        for i, (title, text) in enumerate(zip(titles, rows.column(p.input_column).to_pylist()), start=1):
            body = (text or "").strip()
            if len(body) > p.max_document_chars:
                body = whole_characters(body, p.max_document_chars).rstrip() + " …"
            blocks.append(f"[{i}] {title}\n{body}" if title else f"[{i}]\n{body}")
        return "\n\n".join(blocks)
