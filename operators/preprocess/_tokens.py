"""Whitespace tokens split into punctuation, elided clitic and word, in Arrow.

The stopword, stemming and lemmatising operators share this tokenisation. A token
is a run of non-whitespace; each token is cut into

* ``pre``: leading punctuation (``"(``),
* ``eli``: a French or Italian elided clitic with its apostrophe (``l'``, ``qu'``,
  ``dell'``), only for those languages,
* ``core``: the word the operator works on,
* ``post``: trailing punctuation (``,``, ``.)``).

Everything runs as Arrow kernels over every token of a batch at once; only the
per-word function (a stemmer, a lemma lookup) sees Python, and then once per
distinct word (:func:`map_unique`). Whitespace between tokens becomes one space.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# Elided clitics: the form before the apostrophe, and the full word where it is
# unambiguous. Gender-ambiguous ones (French l', Italian l'/dell'/nell'...) map to
# themselves: they are split off as a word of their own but not guessed.
ELISIONS: dict[str, dict[str, str]] = {
    "fr": {
        "c": "ce", "d": "de", "j": "je", "l": "l", "m": "me", "n": "ne", "s": "se", "t": "te",
        "qu": "que", "jusqu": "jusque", "lorsqu": "lorsque", "puisqu": "puisque",
        "quoiqu": "quoique", "presqu": "presque", "quelqu": "quelque",
    },
    "it": {
        "c": "ci", "d": "di", "m": "mi", "t": "ti", "s": "si", "v": "vi", "n": "ne",
        "un": "una", "nessun": "nessuna",
        "l": "l", "dell": "dell", "all": "all", "dall": "dall", "nell": "nell", "sull": "sull",
        "coll": "coll", "pell": "pell", "quest": "quest", "quell": "quell",
    },
}

_APOSTROPHES = "'’"
_NOT_WORD = r"[^\p{L}\p{N}\p{M}]"


def _token_pattern(language: str) -> str:
    clitics = sorted(ELISIONS.get(language, {}), key=len, reverse=True)
    eli = f"(?P<eli>(?i:{'|'.join(clitics)})[{_APOSTROPHES}])?" if clitics else "(?P<eli>)"
    return rf"^(?P<pre>{_NOT_WORD}*){eli}(?P<core>.*?)(?P<post>{_NOT_WORD}*)$"


@dataclass
class Tokens:
    """The tokens of a text array: per-row lists plus the parts of every token (flat)."""

    texts: pa.Array
    lists: pa.ListArray
    pre: pa.Array
    eli: pa.Array
    core: pa.Array
    post: pa.Array

    @property
    def parents(self) -> np.ndarray:
        """Row index of every flat token."""
        return pc.list_parent_indices(self.lists).to_numpy(zero_copy_only=False)

    def join(self, values: pa.Array, keep: pa.Array | None = None) -> pa.Array:
        """Rows rebuilt from one string per token, joined by single spaces.

        ``keep`` (boolean per token) drops tokens; null texts stay null and a row
        whose tokens are all dropped becomes ``""``.
        """
        n = len(self.texts)
        parents = self.parents
        if keep is not None:
            mask = pc.fill_null(keep, False).to_numpy(zero_copy_only=False)
            values = values.filter(pa.array(mask))
            parents = parents[mask]
        counts = np.bincount(parents, minlength=n) if len(parents) else np.zeros(n, dtype=np.int64)
        offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
        lists = pa.ListArray.from_arrays(offsets, values.cast(pa.string()))
        joined = pc.binary_join(lists, " ")
        return pc.if_else(pc.is_null(self.texts), pa.scalar(None, pa.string()), joined)


def tokenize(texts: pa.Array, language: str) -> Tokens:
    """Split every text of ``texts`` (one language) into tokens and token parts."""
    texts = texts.cast(pa.string())
    lists = pc.split_pattern_regex(pc.utf8_trim_whitespace(texts), r"\s+")
    flat = pc.list_flatten(lists)
    # Most tokens are bare words; the (slow, capturing) regex only sees those with punctuation.
    has_mark = pc.match_substring_regex(flat, _NOT_WORD)
    parts = pc.extract_regex(flat.filter(has_mark), _token_pattern(language))
    empty = pc.if_else(has_mark, "", "")

    def field(name: str, base: pa.Array) -> pa.Array:
        return pc.replace_with_mask(base, has_mark, pc.fill_null(pc.struct_field(parts, name), ""))

    return Tokens(texts, lists, field("pre", empty), field("eli", empty), field("core", flat), field("post", empty))


def map_unique(values: pa.Array, fn: Callable[[list[str]], Iterable[str]]) -> pa.Array:
    """``fn`` applied to the distinct values only (``fn`` maps a list to a list), spread back."""
    if len(values) == 0:
        return pa.array([], pa.string())
    encoded = pc.dictionary_encode(values)
    mapped = pa.array(list(fn(encoded.dictionary.to_pylist())), pa.string())
    return mapped.take(encoded.indices)


def normalize_apostrophes(values: pa.Array) -> pa.Array:
    return pc.replace_substring(values, "’", "'")


def expand_elisions(text: str, language: str) -> str:
    """Split French/Italian elided clitics off the next word (``qu'il`` -> ``que il``).

    Unambiguous clitics become their full word, keeping the capital
    (``D'abord`` -> ``De abord``); gender-ambiguous ones lose only the apostrophe
    (``l'homme`` -> ``l homme``). French ``s'`` before ``il``/``ils`` is ``si``.
    """
    pattern = _ELISION_RE.get(language)
    return pattern.sub(lambda m: _expand(m, language), text) if pattern else text


def _expand(match: re.Match, language: str) -> str:
    clitic, following = match.group(1), match.group(2)
    full = ELISIONS[language][clitic.lower()]
    if language == "fr" and clitic.lower() == "s" and following.lower() in ("il", "ils"):
        full = "si"
    if clitic.isupper() and (len(clitic) > 1 or following.isupper()):
        full = full.upper()
    elif clitic[0].isupper():
        full = full[0].upper() + full[1:]
    return f"{full} {following}"


_ELISION_RE = {
    language: re.compile(
        rf"(?<!\w)({'|'.join(sorted(clitics, key=len, reverse=True))})[{_APOSTROPHES}](\w+)", re.IGNORECASE
    )
    for language, clitics in ELISIONS.items()
}
