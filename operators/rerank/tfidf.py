"""Lexical reranking: TF-IDF vectors fitted on the candidates, or BM25 over them."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Sequence

import numpy as np
from pydantic import Field

from operators.local_files import regex
from operators.rerank.base import RerankParams, Reranker


class TfidfReranker(Reranker):
    """Rerank each query's top candidates by TF-IDF similarity to the query (or BM25 over the candidates).

    The statistics come from the candidates themselves, not from the index: a
    scikit-learn ``TfidfVectorizer`` is fitted on the candidate texts of each query
    (``fit_on: candidates``) or on every candidate text of the batch (``fit_on: all``;
    the local executor passes all queries as one batch, Ray Data whatever its batches
    hold, so prefer ``candidates`` when results must not depend on the executor). The
    query is transformed with the same vectorizer and compared with
    ``sklearn.metrics.pairwise``:

    * ``cosine``: cosine similarity;
    * ``euclidean`` / ``manhattan``: the *negative* distance, because a reranker's
      score must grow with relevance (the nearest candidate gets the highest score).
      With the default ``norm: l2`` euclidean ranks like cosine (``|q-d|^2 = 2 - 2cos``);
    * ``bm25``: a ``bm25s`` index (``k1``, ``b``, Lucene's formula) built over the same
      candidates, tokenised by the vectorizer's own analyzer so every similarity sees
      the same terms.

    A query with no terms left after tokenisation, or candidates without any, get
    score 0 everywhere (the incoming order then decides, as for every tie). This is
    mosaicRAG's TF-IDF reranker.

    Usage::

        TfidfReranker({"similarity": "bm25", "n": 20})(first_stage_results)
    """

    name = "rerank.tfidf"
    aliases = ("tfidf_rerank", "tf-idf")

    #: One batch of every query (as before rerankers had a batch size): ``fit_on: all`` fits on the batch.
    batch_size: ClassVar[int | None] = None
    #: A query's scores under ``fit_on: all`` depend on the other queries of its batch, which a cache entry (one
    #: query's rows) does not hold: the step cache gave a query back the scores of another batch.
    cacheable_if: ClassVar[str | None] = "fit_on == 'candidates'"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cacheable = self.params.fit_on == "candidates"  # type: ignore[misc]  (a per-step setting)

    class Params(RerankParams):
        similarity: Literal["cosine", "euclidean", "manhattan", "bm25"] = Field(
            "cosine", description="How a candidate is compared with the query: cosine similarity of TF-IDF vectors, "
            "negative euclidean or manhattan distance between them (nearest first), or BM25 over the candidates.")
        fit_on: Literal["candidates", "all"] = Field(
            "candidates", description="Term statistics from each query's own candidates, or from every candidate "
            "of the batch (all queries the executor passes together).")
        lowercase: bool = Field(True, description="Lowercase texts and query before tokenising.")
        stop_words: Literal["english"] | None = Field(None, description="Drop scikit-learn's English stop words; "
                                                      "null keeps every word.")
        token_pattern: str = Field(r"(?u)\b\w\w+\b", min_length=1, json_schema_extra=regex(), description="Regular "
                                   "expression of a token (scikit-learn's default: runs of 2+ word characters); the "
                                   "service runs the default only.")
        max_ngram: int = Field(1, ge=1, le=3, description="Use word n-grams from 1 up to this length as terms.")
        sublinear_tf: bool = Field(False, description="TF-IDF only: use 1 + log(tf) instead of the raw count.")
        norm: Literal["l2", "l1"] | None = Field("l2", description="TF-IDF only: normalise each vector to unit "
                                                  "l2 or l1 length; null keeps raw weights (distances then grow "
                                                  "with text length).")
        k1: float = Field(1.5, ge=0, description="BM25 only: term-frequency saturation.")
        b: float = Field(0.75, ge=0, le=1, description="BM25 only: document-length normalisation.")

    def _vectorizer(self):
        from sklearn.feature_extraction.text import TfidfVectorizer

        p = self.params
        return TfidfVectorizer(lowercase=p.lowercase, stop_words=p.stop_words, token_pattern=p.token_pattern,
                               ngram_range=(1, p.max_ngram), sublinear_tf=p.sublinear_tf, norm=p.norm)

    def score_texts(self, query: str, texts: Sequence[str]) -> np.ndarray:
        return self._score(query, texts, self._fit(texts))

    def score_queries(self, queries: Sequence[str], texts: Sequence[Sequence[str]]) -> list[np.ndarray | Exception]:
        if self.params.fit_on == "candidates":
            return super().score_queries(queries, texts)
        try:
            fitted = self._fit([text for candidates in texts for text in candidates])
        except Exception as err:  # noqa: BLE001  (the failure policy decides, per query)
            return [err for _ in queries]
        results: list[np.ndarray | Exception] = []
        for query, candidates in zip(queries, texts):
            try:
                results.append(self._score(query, candidates, fitted))
            except Exception as err:  # noqa: BLE001
                results.append(err)
        return results

    # -- fitting and scoring -----------------------------------------------------

    def _fit(self, texts: Sequence[str]) -> dict[str, Any]:
        """What scoring needs from ``texts`` (each distinct text counted once): the fitted vectorizer, or None
        when no text has a term; for bm25 the analyzer and the index."""
        corpus = list(dict.fromkeys(texts))
        vectorizer = self._vectorizer()
        if self.params.similarity == "bm25":
            analyze = vectorizer.build_analyzer()
            tokens = [analyze(text) for text in corpus]
            if not any(tokens):
                return {"analyze": analyze, "bm25": None}
            from operators.bm25s_import import load_bm25s

            index = load_bm25s().BM25(k1=self.params.k1, b=self.params.b, method="lucene")
            index.index(tokens, show_progress=False)
            return {"analyze": analyze, "bm25": index, "row": {text: i for i, text in enumerate(corpus)}}
        try:
            vectorizer.fit(corpus)
        except ValueError:  # "empty vocabulary": no candidate has a single term
            return {"vectorizer": None}
        return {"vectorizer": vectorizer}

    def _score(self, query: str, texts: Sequence[str], fitted: dict[str, Any]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        if self.params.similarity == "bm25":
            query_tokens = fitted["analyze"](query)
            if fitted["bm25"] is None or not query_tokens:
                return np.zeros(len(texts))
            scores = fitted["bm25"].get_scores(query_tokens)
            return np.asarray(scores, dtype=np.float64)[[fitted["row"][text] for text in texts]]
        vectorizer = fitted["vectorizer"]
        if vectorizer is None:
            return np.zeros(len(texts))
        query_vector = vectorizer.transform([query])
        if query_vector.nnz == 0:  # no query term is in the vocabulary: nothing to compare
            return np.zeros(len(texts))
        from sklearn.metrics.pairwise import cosine_similarity, euclidean_distances, manhattan_distances

        vectors = vectorizer.transform(texts)
        if self.params.similarity == "cosine":
            return cosine_similarity(query_vector, vectors)[0].astype(np.float64)
        distance = euclidean_distances if self.params.similarity == "euclidean" else manhattan_distances
        return -distance(query_vector, vectors)[0].astype(np.float64)
