"""Which context documents an uncited answer came from (generate.answer's ``attribute_uncited``, and a short
answer's span).

Shared words alone are loose evidence: the question's own words, stopwords and a word most of the documents
hold ("architecture" in five architecture pages) say nothing about which document the answer came from. So an
answer is read for its *distinctive* words: the words of the shared BM25 tokenizer (Snowball stems, bm25s's
English stopwords, and the words a model uses to talk about answering: "I don't know", "the documents do not
say") that the question does not hold. Each weighs its inverse document frequency across the context documents
(scikit-learn's ``TfidfVectorizer``), so a word one document holds counts for more than one all of them hold.

A document is a source when it holds at least ``min_overlap`` of that weight *and* specific evidence: a phrase
of the answer (two consecutive distinctive words, stopwords between them aside) or a rare word (held by at most
half of the documents). Sources are picked greedily, best first: after the first, a document counts only for
the distinctive words no source picked before holds, so a second page that merely repeats the first's common
words is no source, while an answer that joins two documents gets both.
"""

from __future__ import annotations

import functools
import re

#: Words about answering, not about the subject: "I don't know", "the documents provided do not mention it".
ABOUT_ANSWERING = ("answer", "answers", "question", "questions", "document", "documents", "context", "passage",
                   "passages", "information", "provided", "mention", "mentioned", "mentions", "say", "says", "know",
                   "known", "unknown", "unclear", "sure", "sorry", "cannot", "yes", "based")


@functools.lru_cache(maxsize=1)
def _tokenizer():
    """The shared BM25 query tokenizer with Snowball's English stopwords (bm25s's list) and ``ABOUT_ANSWERING``
    left out, Chinese, Japanese and Korean cut into pairs of characters (the "cjk_bigrams" rule): a Chinese answer
    was one word, which no document's clause was, so it had no source."""
    from operators.preprocess.stopwords import stopword_set
    from operators.store.bm25 import query_tokenizer

    return query_tokenizer(tuple(sorted(stopword_set("en", "snowball") | set(ABOUT_ANSWERING))), "english",
                           "cjk_bigrams")


def content_words(texts: list[str]) -> list[list[str]]:
    """Each text's words that carry content, in order: stems, stopwords and words about answering left out."""
    return _tokenizer()([t or "" for t in texts])


def _with_phrases(tokens: list[str]) -> list[str]:
    """The words and the consecutive pairs of words (stopwords between them aside), as terms."""
    return tokens + [f"{a} {b}" for a, b in zip(tokens, tokens[1:])]


def distinctive(answer: str, question: str) -> tuple[list[str], set[str]]:
    """The answer's content words the question does not hold (in order, once each), and its phrases of two of
    them."""
    answer_words, question_words = content_words([answer, question])
    asked = set(question_words)
    words = list(dict.fromkeys(w for w in answer_words if w not in asked))
    new = set(words)
    phrases = {f"{a} {b}" for a, b in zip(answer_words, answer_words[1:]) if a in new and b in new and a != b}
    return words, phrases


def attribute(answer: str, texts: dict[int | None, str | None], min_overlap: float, question: str = "") -> list[int]:
    """Document numbers the answer came from, best first (3 at most): see the module docstring."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    numbers = [n for n in texts if n is not None]
    words, phrases = distinctive(answer, question)
    if not words or not numbers:
        return []
    documents = content_words([texts[n] or "" for n in numbers])
    if not any(documents):
        return []
    vectorizer = TfidfVectorizer(analyzer=_with_phrases, norm=None)
    terms = vectorizer.fit(documents).get_feature_names_out()
    held = [set(terms[row.indices]) for row in vectorizer.transform(documents)]
    idf = dict(zip(terms, vectorizer.idf_))
    rarest = float(vectorizer.idf_.max())
    weight = {w: idf.get(w, rarest) for w in words}  # a word no document holds counts as much as the rarest one
    total = sum(weight.values())
    frequency = {w: sum(w in h for h in held) for w in words}
    rare = {w for w in words if 0 < frequency[w] <= max(1, len(numbers) // 2)}
    chosen: list[int] = []
    unexplained = set(words)
    while len(chosen) < 3 and unexplained:
        best, best_share = None, 0.0
        for i, n in enumerate(numbers):
            if n in chosen:
                continue
            new = unexplained & held[i]
            share = sum(weight[w] for w in new) / total
            evidence = bool(new & rare) or any(p in held[i] and set(p.split()) & new for p in phrases)
            if evidence and share >= min_overlap and share > best_share:
                best, best_share = i, share
        if best is None:
            break
        chosen.append(numbers[best])
        unexplained -= held[best]
    return chosen


def containing(answer: str, texts: dict[int | None, str | None], question: str = "") -> list[int]:
    """Document numbers whose text contains the answer as written, word for word (case, spacing and a leading
    article ignored), in number order (3 at most); none when the answer holds no distinctive word (a "yes", the
    question's own words, "I don't know"): every document would hold it, or none that means it. An end in Chinese
    or Japanese needs no word boundary (their words are not spaced: ``痛苦记忆`` is held by ``了痛苦记忆的``)."""
    from operators.store.cjk import cjk_characters

    def squeeze(text: str) -> str:
        return " ".join(text.lower().split())

    span = re.sub(r"^(?:an?|the) ", "", squeeze(answer))
    if not span or not distinctive(span, question)[0]:
        return []
    cjk = cjk_characters()
    before, after = ("" if span[0] in cjk else r"(?<!\w)"), ("" if span[-1] in cjk else r"(?!\w)")
    pattern = re.compile(before + re.escape(span) + after)
    return sorted(n for n, t in texts.items() if n is not None and pattern.search(squeeze(t or "")))[:3]
