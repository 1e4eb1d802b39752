"""Snowball stemming, per row language."""

from __future__ import annotations

import threading

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import ConfigDict

from operators.preprocess._languages import SNOWBALL_NAMES, LanguageParams, LanguageTextRewriter
from operators.preprocess._tokens import map_unique, tokenize


class SnowballStemmer(LanguageTextRewriter):
    """Reduce every word to its Snowball stem (PyStemmer), in English, German, French or Italian.

    Words are lower-cased (Snowball works on lower case) and stemmed; punctuation
    around a word and French/Italian elided clitics are kept (``l'homme,`` ->
    ``l'homm,``). Each distinct word of a batch is stemmed once, in C. Whitespace
    becomes single spaces; rows in other languages pass through unchanged.

    Usage::

        SnowballStemmer({"language_column": "lang"})(pa.table({
            "text": ["Running connections", "Die Häuser", "continuellement"], "lang": ["en", "de", "fr"]}))
        # text: ["run connect", "die haus", "continuel"]
    """

    name = "preprocess.stem"

    class Params(LanguageParams):
        model_config = ConfigDict(extra="forbid")

    def setup(self) -> None:
        # PyStemmer objects are not thread-safe: one per thread, built on first use.
        self._local = threading.local()

    def _stemmer(self, language: str):
        stemmers = getattr(self._local, "stemmers", None)
        if stemmers is None:
            stemmers = self._local.stemmers = {}
        if language not in stemmers:
            import Stemmer

            stemmers[language] = Stemmer.Stemmer(SNOWBALL_NAMES[language])
        return stemmers[language]

    def process(self, language: str, texts: pa.Array) -> pa.Array:
        tokens = tokenize(texts, language)
        stems = map_unique(pc.utf8_lower(tokens.core), self._stemmer(language).stemWords)
        words = pc.binary_join_element_wise(tokens.pre, pc.utf8_lower(tokens.eli), stems, tokens.post, "")
        return tokens.join(words, pc.greater(pc.utf8_length(words), 0))
