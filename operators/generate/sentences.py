"""The sentences of a document that matter for a query: what generate.context keeps when a small model's
prompt must stay short (a 135M model reads a few hundred tokens well, and every token costs time on a CPU)."""

from __future__ import annotations

import re

#: A Chinese or Japanese sentence's end, with its closing quotes: no space follows it.
_CJK_END = re.compile(r"[。！？][」』”’）]*$")


def best_sentences(text: str, query: str, keep: int) -> str:
    """The ``keep`` sentences of ``text`` (Punkt) that BM25 scores highest for ``query``, in their order in the
    text; ties (and sentences sharing no word with the query) go to the earlier sentence, so a text with no
    match keeps its opening, where a Wikipedia paragraph says what its subject is. Tokens are BM25's own (English
    stopwords, Snowball stems) under the "cjk_bigrams" rule (``operators.store.cjk``): a Chinese or Japanese clause,
    written without spaces, was one token that a query's words never matched, so the opening was kept."""
    ranked = ranked_sentences(text, query, keep)
    if ranked is None:
        return text.strip()
    return joined(sentence for _, sentence in sorted(ranked))


def joined(sentences) -> str:
    """``sentences`` one after the other: a space between two, none after a Chinese or Japanese stop (``。``), as such
    text is written."""
    parts: list[str] = []
    for sentence in sentences:
        if parts and not _CJK_END.search(parts[-1]):
            parts.append(" ")
        parts.append(sentence)
    return "".join(parts)


def ranked_sentences(text: str, query: str, keep: int | None = None) -> list[tuple[int, str]] | None:
    """The best ``keep`` (null: every one) sentences of ``text`` for ``query`` as ``(position, sentence)``, best
    first as ``best_sentences`` scores them; None when ``text`` has no more than ``keep`` sentences (it is kept
    whole)."""
    import numpy as np

    from operators.bm25s_import import load_bm25s
    from operators.preprocess._chunk_units import punkt_tokenizer, sentence_spans
    from operators.store.bm25 import query_tokenizer

    bm25s = load_bm25s()

    spans = sentence_spans(text, punkt_tokenizer("english"))
    if keep is not None and len(spans) <= keep:
        return None
    sentences = [text[start:end].strip() for start, end in spans]
    if len(sentences) < 2 or not query.strip():  # nothing to score: from the first
        return list(enumerate(sentences))[:keep]
    tokenize = query_tokenizer("en", "english", "cjk_bigrams")
    tokens = tokenize(sentences)
    if not any(tokens):  # only punctuation, numbers' signs, stopwords: bm25s cannot index an empty vocabulary
        return list(enumerate(sentences))[:keep]
    index = bm25s.BM25()
    index.index(tokens, show_progress=False)
    words = [w for w in tokenize([query])[0] if w in index.vocab_dict]
    scores = index.get_scores(words) if words else np.zeros(len(sentences))
    chosen = sorted(range(len(sentences)), key=lambda i: (-float(scores[i]), i))[:keep]
    return [(i, sentences[i]) for i in chosen]
