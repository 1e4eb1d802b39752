"""The sentences of a document that matter for a query: what generate.context keeps when a small model's
prompt must stay short (a 135M model reads a few hundred tokens well, and every token costs time on a CPU)."""

from __future__ import annotations

import functools


def best_sentences(text: str, query: str, keep: int) -> str:
    """The ``keep`` sentences of ``text`` (Punkt) that BM25 scores highest for ``query``, in their order in the
    text; ties (and sentences sharing no word with the query) go to the earlier sentence, so a text with no
    match keeps its opening, where a Wikipedia paragraph says what its subject is."""
    import bm25s
    import numpy as np

    from operators.preprocess._chunk_units import punkt_tokenizer, sentence_spans

    spans = sentence_spans(text, punkt_tokenizer("english"))
    if len(spans) <= keep:
        return text.strip()
    sentences = [text[start:end] for start, end in spans]
    stemmer = _stemmer()
    corpus = bm25s.tokenize(sentences, stopwords="en", stemmer=stemmer, show_progress=False)
    index = bm25s.BM25()
    index.index(corpus, show_progress=False)
    vocab = corpus.vocab
    words = bm25s.tokenize([query], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)[0]
    scores = index.get_scores([w for w in words if w in vocab]) if any(w in vocab for w in words) \
        else np.zeros(len(sentences))
    chosen = sorted(range(len(sentences)), key=lambda i: (-float(scores[i]), i))[:keep]
    return " ".join(sentences[i].strip() for i in sorted(chosen))


@functools.cache
def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("english")
