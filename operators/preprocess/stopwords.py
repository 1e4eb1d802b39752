"""Stopword removal, per row language."""

from __future__ import annotations

import functools
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import ConfigDict, Field

from operators.preprocess._languages import LanguageParams, LanguageTextRewriter
from operators.preprocess._tokens import normalize_apostrophes, tokenize


class StopwordRemover(LanguageTextRewriter):
    """Remove stopwords in English, German, French or Italian, by each row's language.

    Tokens are split on whitespace; a token goes when its word (without surrounding
    punctuation, any case) is on the language's list, punctuation and all. French
    and Italian elided clitics go too (``l'homme`` -> ``homme``). Whitespace becomes
    single spaces; rows in other languages pass through unchanged.

    Usage::

        StopwordRemover({"language_column": "lang"})(pa.table({
            "text": ["The cat sat on the mat.", "Der Hund und die Katze.", "Le chat et l'oiseau."],
            "lang": ["en", "deu", "fr"]}))
        # text: ["cat sat mat.", "Hund Katze.", "chat oiseau."]
    """

    name = "preprocess.stopwords"

    class Params(LanguageParams):
        model_config = ConfigDict(extra="forbid")
        stopword_list: Literal["iso", "snowball"] = Field(
            "iso",
            description=(
                "Which lists: 'iso' (stopwords-iso, broad: also drops words such as 'computer' or 'anno') or "
                "'snowball' (the short Snowball/NLTK lists, shipped with bm25s)."
            ),
        )
        case_sensitive: bool = Field(
            False, description="Match stopwords only in the case they are listed (lower case); False ignores case."
        )
        extra_stopwords: list[str] = Field(
            default_factory=list, description="More words to remove, in every language."
        )
        keep_words: list[str] = Field(
            default_factory=list, description="Words never removed even if a list has them (e.g. 'computer')."
        )

    def setup(self) -> None:
        self._stopwords = {lang: self._stopword_array(lang) for lang in ("en", "de", "fr", "it")}

    def _stopword_array(self, language: str) -> pa.Array:
        words = set(stopword_set(language, self.params.stopword_list)) | set(self.params.extra_stopwords)
        words = {w.replace("’", "'") for w in words}
        if not self.params.case_sensitive:
            words = {w.lower() for w in words}
            keep = {w.lower() for w in self.params.keep_words}
        else:
            keep = set(self.params.keep_words)
        return pa.array(sorted(words - keep), pa.string())

    def process(self, language: str, texts: pa.Array) -> pa.Array:
        tokens = tokenize(texts, language)
        key = normalize_apostrophes(tokens.core)
        if not self.params.case_sensitive:
            key = pc.utf8_lower(key)
        is_stop = pc.is_in(key, value_set=self._stopwords[language])
        # An elided clitic (l', qu') is a function word: the token keeps its punctuation and word.
        kept = pc.binary_join_element_wise(tokens.pre, tokens.core, tokens.post, "")
        keep = pc.and_(pc.invert(is_stop), pc.greater(pc.utf8_length(kept), 0))
        return tokens.join(kept, keep)


@functools.lru_cache(maxsize=None)
def stopword_set(language: str, source: str) -> frozenset[str]:
    """The stopwords of ``language`` (ISO 639-1) from ``source`` ('iso' or 'snowball'), cached."""
    if source == "iso":
        import stopwordsiso

        return frozenset(stopwordsiso.stopwords(language))
    from operators.bm25s_import import load_bm25s

    load_bm25s()
    from bm25s import stopwords as snowball

    lists = {
        "en": snowball.STOPWORDS_EN_PLUS,
        "de": snowball.STOPWORDS_GERMAN,
        "fr": snowball.STOPWORDS_FRENCH,
        "it": snowball.STOPWORDS_ITALIAN,
    }
    return frozenset(lists[language])
