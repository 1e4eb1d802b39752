"""Punctuation removal with contraction expansion and Unicode normalisation."""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import ConfigDict, Field

from operators.preprocess._languages import (
    LanguageParams,
    LanguageTextRewriter,
    apply_by_language,
    normalize_language,
)
from operators.preprocess._tokens import expand_elisions
from operators.tables import set_column, text_column


class PunctuationRemover(LanguageTextRewriter):
    """Strip punctuation after expanding contractions and normalising Unicode, by each row's language.

    In order: English contractions are expanded (``isn't`` -> ``is not``, with the
    ``contractions`` package) and possessive ``'s`` dropped; French and Italian elided
    clitics are split off (``qu'il`` -> ``que il``, ``c'è`` -> ``ci è``, ambiguous
    ``l'homme`` -> ``l homme``); text is NFKD-normalised (ligatures, full-width and
    other compatibility forms decomposed), accents optionally stripped, and
    recomposed to NFC; every punctuation mark and symbol becomes a space (except
    decimal and thousands separators between digits: ``3.14``, ``1,000``); runs of
    spaces collapse (line breaks are kept). Rows in other languages pass through
    unchanged.

    Usage::

        PunctuationRemover({"language_column": "lang"})(pa.table({
            "text": ["It isn't Bob's!", "Qu'il vienne, d'accord ?", "Straße—ﬁnal."], "lang": ["en", "fr", "de"]}))
        # text: ["It is not Bob", "Que il vienne de accord", "Straße final"]
    """

    name = "preprocess.punctuation"

    class Params(LanguageParams):
        model_config = ConfigDict(extra="forbid")
        expand_contractions: bool = Field(
            True, description="Expand English contractions and split French/Italian elisions before stripping."
        )
        strip_accents: bool = Field(
            False, description="Drop combining marks after NFKD decomposition (café -> cafe, Häuser -> Hauser)."
        )
        apply_to_query: bool = Field(
            False,
            description="Also clean the 'query' column in place, in default_language (queries carry no language).",
        )

    def setup(self) -> None:
        import contractions  # noqa: F401

    def reads(self) -> list[str]:
        columns = super().reads()
        if self.params.apply_to_query and "query" not in columns:
            columns.append("query")
        return columns

    def requires(self) -> list[str]:
        return super().requires() + (["query"] if self.params.apply_to_query else [])

    def produces(self) -> dict[str, str]:
        columns = super().produces()
        if self.params.apply_to_query:
            columns.setdefault("query", "data")
        return columns

    def transform(self, table: pa.Table) -> pa.Table:
        out = super().transform(table)
        if not self.params.apply_to_query or table.num_rows == 0:
            return out
        query = text_column(table, "query", op=self.name, step=self.step_id)
        # Queries repeat on every row of a qid: clean each distinct query once.
        encoded = pc.dictionary_encode(query)
        groups = {normalize_language(self.params.default_language): np.arange(len(encoded.dictionary))}
        cleaned = apply_by_language(encoded.dictionary, groups, self.process)
        return set_column(out, "query", cleaned.take(encoded.indices))

    def process(self, language: str, texts: pa.Array) -> pa.Array:
        if self.params.expand_contractions:
            texts = pa.array([None if t is None else _expand(t, language) for t in texts.to_pylist()], pa.string())
        texts = pc.utf8_normalize(texts, form="NFKD")
        if self.params.strip_accents:
            texts = pc.replace_substring_regex(texts, r"\p{M}+", "")
        texts = pc.utf8_normalize(texts, form="NFC")
        # Decimal and thousands separators inside numbers survive (3.14, 1,000).
        texts = pc.replace_substring_regex(texts, r"(\p{Nd})\.(\p{Nd})", "\\1\x01\\2")
        texts = pc.replace_substring_regex(texts, r"(\p{Nd}),(\p{Nd})", "\\1\x02\\2")
        texts = pc.replace_substring_regex(texts, r"[\p{P}\p{S}]+", " ")
        texts = pc.replace_substring(pc.replace_substring(texts, "\x01", "."), "\x02", ",")
        texts = pc.replace_substring_regex(texts, r"[^\S\n]+", " ")
        texts = pc.replace_substring_regex(texts, r" ?\n ?", "\n")
        return pc.utf8_trim_whitespace(texts)


def _expand(text: str, language: str) -> str:
    if language == "en":
        import contractions

        return _POSSESSIVE.sub(r"\1", contractions.fix(text, slang=False))
    return expand_elisions(text, language)


_POSSESSIVE = re.compile(r"(\w)['’]s\b")
