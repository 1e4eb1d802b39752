"""Dictionary lemmatisation (simplemma), per row language."""

from __future__ import annotations

import functools

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import ConfigDict, Field

from operators.preprocess._languages import LanguageParams, LanguageTextRewriter, normalize_language
from operators.preprocess._tokens import map_unique, tokenize


class Lemmatizer(LanguageTextRewriter):
    """Replace every word by its lemma (simplemma, offline), in English, German, French or Italian.

    Each distinct word of a batch is looked up once in simplemma's dictionary for the
    row's language; unknown words stay as they are. Punctuation around a word and
    French/Italian elided clitics are kept. Whitespace becomes single spaces; rows in
    other languages pass through unchanged.

    Usage::

        Lemmatizer({"language_column": "lang"})(pa.table({
            "text": ["The children went home", "Die Häuser", "Les chevaux"], "lang": ["en", "de", "fr"]}))
        # text: ["the child go home", "der Haus", "le cheval"]
    """

    name = "preprocess.lemmatize"

    class Params(LanguageParams):
        model_config = ConfigDict(extra="forbid")
        lowercase: bool = Field(False, description="Lower-case the lemmas (German nouns are capitalised otherwise).")
        greedy: bool = Field(
            False, description="simplemma's greedy mode: also reduce words by affix rules (more recall, more errors)."
        )

    def setup(self) -> None:
        import simplemma  # noqa: F401  (its dictionaries load on first use of a language)

        default = normalize_language(self.params.default_language)
        if default:  # warm the most likely dictionary now rather than in the first call
            _lemma("a", default, self.params.greedy)

    def process(self, language: str, texts: pa.Array) -> pa.Array:
        tokens = tokenize(texts, language)
        lemmas = map_unique(tokens.core, lambda words: _lemmatize_words(tuple(words), language, self.params.greedy))
        if self.params.lowercase:
            lemmas = pc.utf8_lower(lemmas)
        words = pc.binary_join_element_wise(tokens.pre, tokens.eli, lemmas, tokens.post, "")
        return tokens.join(words, pc.greater(pc.utf8_length(words), 0))


def _lemmatize_words(words: tuple[str, ...], language: str, greedy: bool) -> list[str]:
    return [_lemma(word, language, greedy) if word else word for word in words]


@functools.lru_cache(maxsize=200_000)
def _lemma(word: str, language: str, greedy: bool) -> str:
    import simplemma

    return simplemma.lemmatize(word, lang=language, greedy=greedy)
