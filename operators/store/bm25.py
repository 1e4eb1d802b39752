"""BM25 over shards with exact global statistics, scored and searched by bm25s.

A shard stores raw term frequencies (a docs x terms CSR matrix), its vocabulary
(strings) and document lengths, never scores: scores depend on N, avgdl and the
document frequencies of the whole live index, which change with every commit.
``build_retrievers`` derives those over the live chunks of all shards, then fills
one ``bm25s.BM25`` per shard with scores computed by bm25s's own scoring functions
over a shared vocabulary, so a sharded index scores exactly like one bm25s index
over the same live corpus. Tombstones and pre-filters are bm25s weight masks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from operators.store.settings import IndexSettings

TF_FILE, VOCAB_FILE, DOCLEN_FILE = "bm25_tf.npz", "bm25_vocab.json", "bm25_doclen.npy"


def _stemmer(settings: IndexSettings):
    import Stemmer

    # A fresh stemmer per call: PyStemmer objects are not thread-safe.
    return Stemmer.Stemmer(settings.stemmer) if settings.stemmer else None


def indexed_texts(chunks: pa.Table, settings: IndexSettings) -> list[str]:
    """The text BM25 sees per chunk: the ``text_fields`` present, joined with a space."""
    parts = [pc.fill_null(chunks.column(f).cast(pa.string()), "")
             for f in settings.text_fields if f in chunks.column_names]
    if len(parts) == 1:
        return parts[0].to_pylist()
    return pc.binary_join_element_wise(*parts, " ").to_pylist()


def tokenize_corpus(texts: list[str], settings: IndexSettings) -> list[list[str]]:
    """Token strings per document, as ``bm25s.tokenization.Tokenizer`` makes them for indexing
    (a document without tokens becomes the empty token, length 1, as in bm25s)."""
    from bm25s.tokenization import Tokenizer

    tokenizer = Tokenizer(stopwords=settings.stopwords or None, stemmer=_stemmer(settings))
    return tokenizer.tokenize(texts, update_vocab=True, return_as="string", show_progress=False)


def tokenize_queries(texts: list[str], settings: IndexSettings) -> list[list[str]]:
    """Token strings per query (same splitter, stopwords and stemmer as the corpus)."""
    import bm25s

    if not texts:
        return []
    return bm25s.tokenize(list(texts), stopwords=settings.stopwords or None, stemmer=_stemmer(settings),
                          return_ids=False, show_progress=False)


@dataclass
class ShardTerms:
    """A shard's raw BM25 statistics."""

    tf: sp.csr_matrix  # docs x local terms, int32 counts
    vocab: list[str]  # local term id -> token string
    doclen: np.ndarray  # int32 tokens per document

    @classmethod
    def from_tokens(cls, tokens: list[list[str]]) -> "ShardTerms":
        ids: dict[str, int] = {}
        cols = np.fromiter((ids.setdefault(t, len(ids)) for doc in tokens for t in doc), dtype=np.int32)
        doclen = np.fromiter((len(doc) for doc in tokens), dtype=np.int32, count=len(tokens))
        rows = np.repeat(np.arange(len(tokens), dtype=np.int32), doclen)
        tf = sp.csr_matrix((np.ones(len(cols), np.int32), (rows, cols)), shape=(len(tokens), len(ids)))
        tf.sum_duplicates()
        return cls(tf=tf, vocab=list(ids), doclen=doclen)

    def save(self, folder: Path) -> list[str]:
        sp.save_npz(folder / TF_FILE, self.tf, compressed=False)
        (folder / VOCAB_FILE).write_text(json.dumps(self.vocab, ensure_ascii=False), encoding="utf-8")
        np.save(folder / DOCLEN_FILE, self.doclen)
        return [TF_FILE, VOCAB_FILE, DOCLEN_FILE]

    @classmethod
    def load(cls, folder: Path) -> "ShardTerms":
        return cls(tf=sp.load_npz(folder / TF_FILE).tocsr(),
                   vocab=json.loads((folder / VOCAB_FILE).read_text(encoding="utf-8")),
                   doclen=np.load(folder / DOCLEN_FILE))


def build_retrievers(shards: list[ShardTerms], live: list[np.ndarray], settings: IndexSettings) -> list:
    """One ``bm25s.BM25`` per shard (None for a shard without live chunks), scored with the
    statistics of the live chunks of all shards: N, avgdl and document frequencies."""
    import bm25s
    from bm25s.scoring import (_build_idf_array, _build_nonoccurrence_array, _select_idf_scorer,
                               _select_tfc_scorer)

    # Global term ids over the union of shard vocabularies.
    global_ids: dict[str, int] = {}
    local_to_global = [np.fromiter((global_ids.setdefault(t, len(global_ids)) for t in s.vocab),
                                   dtype=np.int64, count=len(s.vocab)) for s in shards]
    df = np.zeros(len(global_ids), dtype=np.int64)
    for s, mask, g in zip(shards, live, local_to_global):
        df += np.bincount(g, weights=s.tf[mask].getnnz(axis=0), minlength=len(global_ids)).astype(np.int64)
    # The vocabulary of a fresh index over the live corpus: terms some live chunk holds.
    kept = df > 0
    new_id = np.cumsum(kept) - 1
    terms = np.array(list(global_ids), dtype=object)[kept]
    vocab_dict = {t: i for i, t in enumerate(terms.tolist())}
    df_kept = df[kept]
    n_docs = int(sum(int(m.sum()) for m in live))
    if n_docs == 0:
        return [None] * len(shards)
    avgdl = np.concatenate([s.doclen[m] for s, m in zip(shards, live)]).mean()

    idf_fn, tfc_fn = _select_idf_scorer(settings.method), _select_tfc_scorer(settings.method)
    frequencies = dict(enumerate(df_kept.tolist()))
    idf = _build_idf_array(frequencies, n_docs=n_docs, compute_idf_fn=idf_fn, dtype="float32")
    nonocc = None
    if settings.method in ("bm25l", "bm25+"):
        nonocc = _build_nonoccurrence_array(frequencies, n_docs=n_docs, compute_idf_fn=idf_fn,
                                            calculate_tfc_fn=tfc_fn, l_d=avgdl, l_avg=avgdl, k1=settings.k1,
                                            b=settings.b, delta=settings.delta, dtype="float32")
    retrievers = []
    for s, mask, g in zip(shards, live, local_to_global):
        if not mask.any():
            retrievers.append(None)
            continue
        coo = s.tf.tocoo()
        keep = mask[coo.row]
        rows, tf = coo.row[keep], coo.data[keep].astype(np.float32)
        cols = new_id[g[coo.col[keep]]]
        # The same arithmetic, in the same precision, as bm25s's own index build.
        tfc = tfc_fn(tf_array=tf, l_d=s.doclen[rows].astype(np.int64), l_avg=avgdl, k1=settings.k1,
                     b=settings.b, delta=settings.delta)
        scores = idf[cols] * tfc
        if nonocc is not None:
            scores -= nonocc[cols]
        matrix = sp.csc_matrix((scores.astype(np.float32), (rows, cols)), shape=(s.tf.shape[0], len(vocab_dict)),
                               dtype=np.float32)
        retriever = bm25s.BM25(k1=settings.k1, b=settings.b, delta=settings.delta, method=settings.method)
        retriever.scores = {"data": matrix.data, "indices": matrix.indices, "indptr": matrix.indptr,
                            "num_docs": s.tf.shape[0]}
        retriever.vocab_dict = vocab_dict
        retriever.nonoccurrence_array = nonocc
        retrievers.append(retriever)
    return retrievers


def search_shard(retriever, query_tokens: list[list[str]], k: int, allowed: np.ndarray | None):
    """Top ``k`` (rows, scores) per query in one shard through bm25s's retrieve; rows outside
    ``allowed`` and zero scores are dropped."""
    n = retriever.scores["num_docs"]
    k = min(k, n)
    mask = None if allowed is None else allowed.astype(np.float32)
    found, scores = retriever.retrieve(query_tokens, k=k, weight_mask=mask, sorted=True, show_progress=False,
                                       n_threads=0)
    out = []
    for rows, vals in zip(found, scores):
        keep = vals > 0
        if allowed is not None:
            keep &= allowed[rows]
        out.append((rows[keep].astype(np.int64), vals[keep].astype(np.float64)))
    return out
