"""A language model's summary of each row's text, in a column of its own (mosaicRAG's LLM summarizer)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from operators.errors import ParamsError
from operators.llm import LLMParams, junk_reason, repetition
from operators.llm.gateway import Completion
from operators.llm.rowwise import Reply, RowwiseLLMStep
from operators.summarize._cut import finished


class DocumentSummarizer(RowwiseLLMStep):
    """Summarise each row's text with a language model into `output_column` (one call per row).

    The prompt gives the row's text (and the query, for a prompt that wants it) and
    asks for a short summary. ``summarize_prompt`` is mosaicRAG's instruction put
    before the text: a shorthand for ``prompt: "<instruction>\\n\\n{text}"``, so give
    one or the other. A row whose call errors, times out or returns junk keeps its
    input text in ``output_column`` and its query is marked degraded (a reply that loops, the same lines or words
    over and over, is junk too: ``repetition``, as for ``generate.answer``); empty texts are
    not sent. ``<output_column>_finish_reason`` holds the model's finish reason (``length`` when ``max_tokens``
    cut the reply, as ``generate.answer``'s ``finish_reason``); a cut summary is trimmed to its last whole
    sentence, and ``<output_column>_cut`` says so (null when the reply was not cut). Scope ``query``: a query with a
    degraded row is never cached, and the usage of cached rows is replayed with them. Prompt fields: ``{text}``,
    ``{query}``.

    Usage::

        DocumentSummarizer({"model": "local", "max_tokens": 96})(results)   # a `summary` column
    """

    name = "summarize.documents"
    aliases = ("llm_summarizer", "DocumentSummarizerStep")
    scope = "query"
    version = "4"  # 2: a summary that loops degrades its row (it was kept as the summary); 3: finish reason and cut
    # columns, a summary cut at max_tokens trimmed to its last whole sentence; 4: a Chinese or
    # Japanese summary cut at max_tokens trimmed at its 。！？ (it was kept whole, "no whole sentence")

    system_prompt: ClassVar[str] = "You summarise documents briefly and faithfully, using only what they say."
    prompt_template: ClassVar[str] = ("Summarise the following text in two or three sentences. "
                                      "Write only the summary.\n\n{text}")
    prompt_fields: ClassVar[tuple[str, ...]] = ("text", "query")
    prompt_required: ClassVar[tuple[str, ...]] = ("text",)

    class Params(LLMParams):
        max_tokens: int = Field(128, gt=0, le=32768, description="Most tokens the model may write per summary.")
        input_column: str = Field("text", description="Column holding the text to summarise.")
        output_column: str = Field("summary", description="Column that receives each row's summary (its input "
                                   "text when the call failed).")
        summarize_prompt: str | None = Field(
            None, description="mosaicRAG's instruction put before each text (e.g. 'Summarize the following text: "
            "'); the same as prompt '<instruction>\\n\\n{text}'. Not together with `prompt`.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.params.summarize_prompt is not None and self.params.prompt is not None:
            raise ParamsError("give either summarize_prompt (an instruction put before the text) or prompt (a "
                              "whole template), not both", op=self.name, step=self.step_id,
                              field="params.summarize_prompt")

    def prompts(self) -> dict[str, str]:
        templates = super().prompts()
        instruction = self.params.summarize_prompt
        if instruction is not None:  # literal text: its braces are not template fields
            templates["prompt"] = instruction.replace("{", "{{").replace("}", "}}").rstrip() + "\n\n{text}"
        return templates

    def reads(self) -> list[str]:
        return ["qid", "query", self.params.input_column]

    def requires(self) -> list[str]:
        return ["qid", self.params.input_column]

    def produces(self) -> dict[str, str]:
        out = self.params.output_column
        return {out: "text", f"{out}_finish_reason": "data", f"{out}_cut": "data"}

    def messages(self, row: dict[str, Any]) -> list[dict[str, Any]] | None:
        text = row[self.params.input_column]
        return self.render(text=text, query=row.get("query") or "") if text and text.strip() else None

    def apply(self, row: dict[str, Any], reply: Reply | None) -> tuple[dict[str, Any], str | None]:
        text = row[self.params.input_column]
        problem = None if reply is None else junk_reason(reply) or repetition(reply.text)
        out = self.params.output_column
        if reply is None or problem is not None or not isinstance(reply, Completion):
            return {out: text, f"{out}_finish_reason": None, f"{out}_cut": None}, problem
        summary, cut = finished(reply)
        return {out: summary, f"{out}_finish_reason": reply.finish_reason, f"{out}_cut": cut}, None
