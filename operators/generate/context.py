"""The context a language model answers from: numbered document blocks within a token budget."""

from __future__ import annotations

from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator

from operators.base import Operator
from operators.llm.aliases import known_model
from operators.local_files import llm_model
from operators.tables import concat, empty_like, in_rank_order, qid_groups, set_column
from operators.unicode import whole_characters


class ContextBuilder(Operator):
    """Number each query's rows in rank order into `[Document i] Title` blocks, within a token budget.

    ``fit: rank``: rows go in by ``rank`` (best first) while their blocks fit in
    ``max_context_length`` tokens; the first block that does not fit is cut to the tokens
    left (when at least ``min_block_tokens`` are) and the rest stay out. ``fit: share``
    (five passages in a small budget: rank order fits three or four): every row gets its
    first sentence (the best one with ``sentences``, else its opening) within an equal
    share of the budget (what a short one leaves goes to the longer ones; one over its share
    is cut at a token), then the tokens left go to further whole sentences, best rows first;
    rows go only where a share would be under ``min_block_tokens``. Tokens are counted with
    litellm's tokenizer for ``model`` (models litellm does not know, the embedded one included,
    are counted with its default tokenizer, so leave some room). Each row gets the
    query's whole context in ``output_column`` (the same text on every row of the query)
    and its number ``i`` in ``index_column`` (null for rows left out), which is how
    ``generate.answer`` maps the citations back to documents. With ``sentences`` each block
    holds only the document's sentences that best match the query. Rows are kept.

    Usage::

        ContextBuilder({"max_context_length": 512})(results)   # context, context_index columns
    """

    name = "generate.context"
    aliases = ("build_context",)
    version = "3"  # 2: a Chinese or Japanese text's sentences end at 。！？ (it was one sentence: fit share cut it)
    # 3: ``sentences`` scores Chinese and Japanese by pairs of characters (a clause was one token, matching nothing)
    scope = "query"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        max_context_length: int = Field(1024, gt=0, description="Most tokens of the whole context.")
        max_documents: int | None = Field(None, gt=0, description="Most documents per query; null: as many as fit.")
        sentences: int | None = Field(None, gt=0, description="Keep only each document's this many sentences that "
                                      "BM25 scores best for the query (in text order; sentences.best_sentences): "
                                      "more documents in fewer tokens, for small models; null: whole texts.")
        model: str = Field("local", min_length=1, json_schema_extra=llm_model(), description="Model whose "
                           "tokenizer counts the budget (an alias or "
                           "a litellm model string).")
        text_column: str = Field("text", description="Column holding each document's text.")
        title_column: str | None = Field("title", description="Column holding the title shown after `[Document i]` "
                                         "(the docno when absent or empty); null: the docno.")
        include_scores: bool = Field(False, description="Add each row's score to its header line.")
        min_block_tokens: int = Field(32, gt=0, description="A block cut to fit needs at least this many tokens "
                                      "left, else it is left out.")
        fit: Literal["rank", "share"] = Field("rank", description="rank: whole blocks in rank order while they fit, "
                                              "the first that does not cut, the rest left out; share: every row its "
                                              "first sentence within an equal share of the budget, then more whole "
                                              "sentences for the best rows while they fit.")
        order: Literal["best_first", "best_last"] = Field("best_first", description="best_first: the blocks in rank "
                                                          "order; best_last: the same blocks and numbers listed "
                                                          "the other way round, the best next to the question, "
                                                          "where a small model reads most.")
        output_column: str = Field("context", description="Column that receives the query's context.")
        index_column: str = Field("context_index", description="Column that receives each row's document number "
                                  "(1, 2, ...; null when left out).")

        _a_known_model = field_validator("model")(known_model)  # a misspelt alias counted with an unknown tokenizer

    def reads(self) -> list[str]:
        columns = ["qid", "docno", "rank", self.params.text_column] + (["query"] if self.params.sentences else [])
        return columns + ([self.params.title_column] if self.params.title_column else [])

    def requires(self) -> list[str]:
        return ["qid", "docno", "rank", self.params.text_column] + (["query"] if self.params.sentences else [])

    def produces(self) -> dict[str, str]:
        return {self.params.output_column: "data", self.params.index_column: "data"}

    def cache_identity(self) -> dict[str, Any]:
        """The params and the litellm model the ``model`` alias names now, whose tokenizer counts the budget: an alias
        pointed at another model (``$TESSERA_MODELS``, ``$TESSERA_HOME/models.yaml``) cuts the context elsewhere,
        where its old context was replayed."""
        from operators.llm import resolve

        return {**super().cache_identity(), "tokenizer_model": resolve(self.params.model).model}

    def setup(self) -> None:
        from operators.llm import resolve  # first: it keeps litellm's import offline

        import litellm  # noqa: F401  (its tokenizer, loaded once)

        self._model = resolve(self.params.model).model

    def transform(self, table: pa.Table) -> pa.Table:
        p = self.params
        if table.num_rows == 0:
            out = set_column(empty_like(table), p.output_column, pa.array([], pa.string()))
            return set_column(out, p.index_column, pa.array([], pa.int32()))
        parts = []
        for _, rows in qid_groups(table):
            rows = in_rank_order(rows)
            query = rows.column("query")[0].as_py() if p.sentences else None
            blocks, numbers = self.build(rows.to_pylist(), query or "")
            context = "\n\n".join(blocks[::-1] if p.order == "best_last" else blocks)
            rows = set_column(rows, p.output_column, pa.array([context] * rows.num_rows, pa.string()))
            parts.append(set_column(rows, p.index_column, pa.array(numbers, pa.int32())))
        return concat(parts)

    def build(self, rows: list[dict[str, Any]], query: str = "") -> tuple[list[str], list[int | None]]:
        """The blocks of one query's rows (in rank order) and each row's number (None when left out)."""
        from operators.generate.sentences import best_sentences

        p = self.params
        if p.fit == "share":
            return self._shared(rows, query)
        blocks: list[str] = []
        numbers: list[int | None] = [None] * len(rows)
        left = p.max_context_length
        for i, row in enumerate(rows):
            if p.max_documents is not None and len(blocks) >= p.max_documents:
                break
            text = (row.get(p.text_column) or "").strip()
            if p.sentences is not None:
                text = best_sentences(text, query, p.sentences)
            block = self._header(row, len(blocks) + 1) + text
            tokens = self._count(block + "\n\n")
            if tokens > left:
                if left < p.min_block_tokens:
                    break
                block = self._cut(block, left)
                tokens = left
            blocks.append(block)
            numbers[i] = len(blocks)
            left -= tokens
            if left <= 0:
                break
        return blocks, numbers

    def _header(self, row: dict[str, Any], n: int) -> str:
        p = self.params
        title = (row.get(p.title_column) if p.title_column else None) or row.get("docno") or ""
        score = f" (score {row['score']:.3f})" if p.include_scores and row.get("score") is not None else ""
        return f"[Document {n}] {title}{score}\n"

    def _shared(self, rows: list[dict[str, Any]], query: str) -> tuple[list[str], list[int | None]]:
        """``fit: share``: the best rows that get ``min_block_tokens`` each; every one its first sentence within an
        equal share of the budget (cut at a token where it is longer), then more sentences, best rows first."""
        from operators.generate.sentences import joined, ranked_sentences

        p = self.params
        taken = min(len(rows), p.max_documents or len(rows), p.max_context_length // p.min_block_tokens)
        headers, candidates = [], []  # per row: its header, its sentences as (position, sentence), first kept first
        for n, row in enumerate(rows[:taken], start=1):
            text = (row.get(p.text_column) or "").strip()
            headers.append(self._header(row, n))  # with sentences: the best first; whole texts: in their order
            candidates.append(ranked_sentences(text, query if p.sentences else "", None)[:p.sentences])

        def size(i: int, sentences: list[tuple[int, str]]) -> int:
            return self._count(headers[i] + joined(s for _, s in sorted(sentences)) + "\n\n")

        kept: list[list[tuple[int, str]]] = [candidates[i][:1] for i in range(taken)]
        cut: list[str | None] = [None] * taken  # a block whose first sentence is over its share
        left = p.max_context_length
        for order, i in enumerate(sorted(range(taken), key=lambda i: size(i, kept[i]))):  # short ones leave more
            share, used = left // (taken - order), size(i, kept[i])
            if used > share:
                cut[i], used = self._cut(headers[i] + (kept[i][0][1] if kept[i] else ""), share), share
            left -= used
        for i in range(taken):  # the tokens left: further sentences, best rows first, while they fit
            while cut[i] is None and len(kept[i]) < len(candidates[i]):
                grown = kept[i] + [candidates[i][len(kept[i])]]
                more = size(i, grown) - size(i, kept[i])
                if more > left:
                    break
                kept[i], left = grown, left - more
        blocks = [cut[i] if cut[i] is not None else headers[i] + joined(s for _, s in sorted(kept[i]))
                  for i in range(taken)]
        numbers = [n if n <= taken else None for n in range(1, len(rows) + 1)]
        return blocks, numbers

    def _count(self, text: str) -> int:
        import litellm

        return int(litellm.token_counter(model=self._model, text=text))

    def _cut(self, text: str, tokens: int) -> str:
        """``text`` cut to ``tokens`` tokens (the last two for " …"), at a whole character: a byte-level tokenizer
        writes a CJK character, an emoji or a Devanagari letter in two or three tokens, and a cut between them
        decoded as U+FFFD (``北京烤� …``), which the model read as part of the document."""
        import litellm

        ids = litellm.encode(model=self._model, text=text)
        cut = litellm.decode(model=self._model, tokens=list(ids)[: max(tokens - 2, 1)])
        whole = cut.rstrip("\ufffd")
        if text.startswith(whole):  # the tokenizer gives the text back as it was: cut at a whole character there
            cut = whole_characters(text, len(cut) if text.startswith(cut) else len(whole))
        return cut + " …"
