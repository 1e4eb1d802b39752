"""BM25 words of Chinese, Japanese and Korean (``IndexSettings.tokens`` "cjk_bigrams"): their text has no spaces
between words, so a run of such characters was one token, which a query for one of its words never matched
(``烤鸭`` did not find ``北京烤鸭是中国著名的菜肴``). Each run is cut into overlapping pairs of characters, as Lucene's
``CJKBigramFilter`` (Elasticsearch's ``cjk`` analyzer) does: no dictionary, every word of two or more characters
found by its pairs; a run of one character is a word of its own."""

from __future__ import annotations

import functools

from operators.unicode import character_class

#: The scripts whose words are not spaced (Korean is, but a word carries its particles: 서울에서, "in Seoul").
_SCRIPTS = r"[\p{scx=Han}\p{scx=Hiragana}\p{scx=Katakana}\p{scx=Hangul}]"


@functools.cache
def cjk_characters() -> frozenset[str]:
    """The word characters (Python's ``\\w``) of those scripts, by Unicode's script extensions (so the long-vowel
    mark ``ー`` and the iteration mark ``々``, shared by two scripts, are in; ``、`` and ``・`` are punctuation)."""
    import regex

    every = "".join(chr(cp) for cp in range(0x32000) if not 0xD800 <= cp < 0xE000)  # the BMP and the ideographs
    return frozenset(c for c in regex.findall(_SCRIPTS, every) if c.isalnum() or c == "_")


@functools.cache
def cjk_class() -> str:
    """``cjk_characters`` as the body of a regex character class."""
    return character_class(cjk_characters())


def has_cjk(text: str) -> bool:
    """Whether ``text`` holds a ``cjk_characters`` one (which "cjk_bigrams" cuts otherwise than "unicode" does); a set
    lookup, as ``operators.unicode.holds``."""
    return not text.isascii() and not cjk_characters().isdisjoint(text)


@functools.cache
def cjk_pattern(marks: str | None = None) -> str:
    """A run of CJK characters, or a run of two or more other word characters (and combining marks ``marks``, a
    character class's body): the words of ``bm25.TOKEN_PATTERN`` or ``bm25.marked_pattern`` where the text has no
    CJK, the CJK runs cut out of them (``3776メートル``: ``3776`` and ``メートル``)."""
    cjk = cjk_class()
    other = f"[^\\W{cjk}]" if marks is None else f"(?:[^\\W{cjk}]|[{marks}])"
    return f"[{cjk}]+|{other}{{2,}}"


def paired(words: list[str]) -> list[str]:
    """``words`` with each CJK run cut into its overlapping pairs of characters (``北京烤鸭``: ``北京``, ``京烤``,
    ``烤鸭``); other words, and the spaces ``QueryTokenizer.pieces`` finds between pieces, as they are."""
    cjk = cjk_characters()
    out: list[str] = []
    for word in words:
        if len(word) > 2 and word[0] in cjk:
            out.extend(word[i:i + 2] for i in range(len(word) - 1))
        else:
            out.append(word)
    return out
