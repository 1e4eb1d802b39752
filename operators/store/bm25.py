"""BM25 over shards with exact global statistics, scored by bm25s.

A shard stores raw term frequencies (a docs x terms CSR matrix), its vocabulary
(strings) and document lengths, never scores: scores depend on N, avgdl and the
document frequencies of the whole live index, which change with every commit.
``build_retrievers`` derives those over the live chunks of all shards, then fills
one ``bm25s.BM25`` per shard with scores computed by bm25s's own scoring functions
over a shared vocabulary, so a sharded index scores exactly like one bm25s index
over the same live corpus.

Queries are tokenized like ``bm25s.tokenize`` and searched by ``search_shard``, which
sums the same bm25s score matrix for a block of queries at once (bit for bit the
scores of bm25s's ``get_scores``); tombstones and pre-filters mask rows out.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from operators.pieces import Pieces
from operators.store.cjk import cjk_pattern, has_cjk, paired
from operators.store.settings import IndexSettings
from operators.unicode import code_point_class, composed, folded, holds, visible

TOKEN_PATTERN = r"(?u)\b\w\w+\b"  # bm25s.tokenize's default token_pattern: IndexSettings.tokens "bm25s"
TF_FILE, VOCAB_FILE, DOCLEN_FILE = "bm25_tf.npz", "bm25_vocab.json", "bm25_doclen.npy"


#: The text_fields already said to be no column of a shard's chunks (once each in a process).
_ABSENT_SAID: set[str] = set()


def indexed_texts(chunks: pa.Table, settings: IndexSettings) -> pa.Array:
    """The text BM25 sees per chunk: the ``text_fields`` present, joined with a space; one that is not (a typo:
    ``txt``) is said once, where it was dropped without a word and only the others were indexed."""
    parts = [pc.fill_null(chunks.column(f).cast(pa.string()), "")
             for f in settings.text_fields if f in chunks.column_names]
    for field in settings.text_fields:
        if field not in chunks.column_names and field not in ("title", "text") and field not in _ABSENT_SAID:
            _ABSENT_SAID.add(field)
            logging.getLogger(__name__).warning(
                "BM25 text_fields %r is no column of these chunks (their columns: %s): the other fields are indexed",
                field, ", ".join(chunks.column_names))
    if not parts:  # nothing to index: every chunk would be empty (and Arrow's join of no column is one scalar)
        from operators.store.errors import IndexStoreError

        raise IndexStoreError(f"none of the index's BM25 text_fields {settings.text_fields} is a column of these "
                              f"chunks (their columns: {', '.join(chunks.column_names)})", field="text_fields")
    joined = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, " ")
    return joined.combine_chunks() if isinstance(joined, pa.ChunkedArray) else joined


class QueryTokenizer:
    """``bm25s.tokenize`` for queries, without its per-call cost.

    Same lower-casing, token pattern, stopwords and stemmer, so the same token strings
    (``tests/operators/store/test_bm25.py`` holds it to ``bm25s.tokenize``); but built once per
    index and reused, where every ``bm25s.tokenize`` call constructs three progress bars and
    a stopword set per text, which is most of a one-query search on a small corpus."""

    def __init__(self, stopwords: str | tuple[str, ...] | None, stemmer: str | None, tokens: str = "unicode") -> None:
        from operators.bm25s_import import load_bm25s

        load_bm25s()
        from bm25s.tokenization import _infer_stopwords

        self._unicode = tokens != "bm25s"  # "unicode", and "cjk_bigrams" (the same, CJK runs cut into pairs)
        self._bigrams = tokens == "cjk_bigrams"
        plain, marked = (cjk_pattern(), cjk_pattern(code_point_class("M"))) if self._bigrams else \
            (TOKEN_PATTERN, marked_pattern())
        self._plain = re.compile(plain).findall
        self._plain_pieces = re.compile(plain + "| ").findall  # tokens, and the spaces between pieces
        if self._unicode:
            self._marked = re.compile(marked).findall
            self._marked_pieces = re.compile(marked + "| ").findall
        self._stopwords = frozenset(_infer_stopwords(stopwords))  # a tuple (a custom list) passes through
        if self._unicode:  # written as the tokens are read: İÇİN, an entry in NFD or with a soft hyphen matched none
            self._stopwords = frozenset(normalized(word, tokens) for word in self._stopwords)
        self._stemmer_language = stemmer
        self._local = threading.local()  # PyStemmer objects are not thread-safe: one per thread

    def __call__(self, texts: list[str]) -> list[list[str]]:
        stem = self._stem_words()
        out = []
        for text in texts:
            tokens = [t for t in self._split(self._prepared(text)) if t not in self._stopwords]
            out.append(stem(tokens) if stem is not None and tokens else tokens)
        return out

    def pieces(self, pieces: list[str]) -> tuple[np.ndarray, np.ndarray, list[str]]:
        """Every term of space-free ``pieces``, in order, as (its piece, its index in the distinct terms),
        and the distinct terms: one lower-casing and one regex pass over the pieces joined by spaces,
        then the stopwords and the stemmer over distinct words only (the same terms as ``__call__``)."""
        found = pa.array(self._split(self._prepared(" ".join(pieces)), pieces=True), pa.string())
        space = pc.equal(found, " ").to_numpy(zero_copy_only=False)
        owner, words = np.cumsum(space)[~space], found.filter(pa.array(~space))
        if self._stopwords:
            keep = pc.invert(pc.is_in(words, value_set=pa.array(list(self._stopwords), pa.string())))
            owner, words = owner[keep.to_numpy(zero_copy_only=False)], words.filter(keep)
        encoded = words.dictionary_encode()
        distinct = encoded.dictionary.to_pylist()
        stem = self._stem_words()
        return owner, encoded.indices.to_numpy(zero_copy_only=False), stem(distinct) if stem else distinct

    def _prepared(self, text: str) -> str:
        return normalized(text, "unicode" if self._unicode else "bm25s")

    def _split(self, text: str, *, pieces: bool = False) -> list[str]:
        """The words of ``text`` (and with ``pieces`` the spaces between): a text without combining marks has the
        same words under both rules, and bm25s's pattern finds them 2-3 times faster than the marked one."""
        if self._unicode and holds(text, "M"):
            found = self._marked_pieces(text) if pieces else self._marked(text)
        else:
            found = self._plain_pieces(text) if pieces else self._plain(text)
        return paired(found) if self._bigrams and has_cjk(text) else found

    def _stem_words(self):
        if self._stemmer_language is None:
            return None
        stemmer = getattr(self._local, "stemmer", None)
        if stemmer is None:
            import Stemmer

            stemmer = self._local.stemmer = Stemmer.Stemmer(self._stemmer_language)
        return stemmer.stemWords


def normalized(text: str, tokens: str) -> str:
    """``text`` as the token rule ``tokens`` (``IndexSettings.tokens``) reads it before cutting it into words:
    composed (NFC) and lower-cased; under "unicode" and "cjk_bigrams" also without the invisible characters inside
    words (``unicode.visible``) and with Turkish's i folded (``unicode.folded``)."""
    return composed(text).lower() if tokens == "bm25s" else folded(visible(composed(text)))


def marked_pattern() -> str:
    """``IndexSettings.tokens`` "unicode": runs of two or more word characters or combining marks. Python's ``\\w``
    has no marks, so bm25s's pattern cut ``हिन्दी`` and ``மொழி`` at their vowel signs into pieces of one letter, which
    it dropped (no token at all), and vocalised Arabic into prefixes that unrelated words share."""
    return f"[\\w{code_point_class('M')}]{{2,}}"


@functools.lru_cache(maxsize=32)
def query_tokenizer(stopwords, stemmer: str | None, tokens: str = "unicode") -> QueryTokenizer:
    """The shared ``QueryTokenizer`` of these settings (thread-safe: a stemmer per thread)."""
    return QueryTokenizer(stopwords, stemmer, tokens)


def tokenize_queries(texts: list[str], settings: IndexSettings) -> list[list[str]]:
    """Token strings per query (same splitter, stopwords and stemmer as the corpus)."""
    stopwords = tuple(settings.stopwords) if isinstance(settings.stopwords, list) else settings.stopwords
    return query_tokenizer(stopwords or None, settings.stemmer, settings.tokens)(texts)


@dataclass
class ShardTerms:
    """A shard's raw BM25 statistics."""

    tf: sp.csr_matrix  # docs x local terms, int32 counts
    vocab: list[str]  # local term id -> token string
    doclen: np.ndarray  # int32 tokens per document

    @classmethod
    def of_texts(cls, texts: pa.Array, settings: IndexSettings) -> "ShardTerms":
        """The term counts bm25s's indexing tokenizer (``bm25s.tokenization.Tokenizer``) gives, made
        from each distinct space-separated piece tokenized once (``operators.pieces``): lower-case,
        ``\\w\\w+``, stopwords, stemmer. A text without tokens holds the empty token once, as in bm25s."""
        stopwords = tuple(settings.stopwords) if isinstance(settings.stopwords, list) else settings.stopwords
        pieces = Pieces.of(texts)
        tokenizer = QueryTokenizer(stopwords or None, settings.stemmer, settings.tokens)
        owner, word, terms = tokenizer.pieces(pieces.distinct)
        vocab: dict[str, int] = {}
        column = np.fromiter((vocab.setdefault(t, len(vocab)) for t in terms), np.int64, count=len(terms))
        tf = pieces.token_counts(owner, column[word], len(vocab))
        doclen = np.asarray(tf.sum(axis=1), dtype=np.int32).ravel()
        empty = np.flatnonzero(doclen == 0)
        if len(empty):
            column = vocab.setdefault("", len(vocab))
            tf = (sp.csr_matrix(tf, shape=(tf.shape[0], len(vocab)))
                  + sp.csr_matrix((np.ones(len(empty), np.int32), (empty, np.full(len(empty), column))),
                                  shape=(tf.shape[0], len(vocab))))
            doclen[empty] = 1
        return cls(tf=tf.astype(np.int32).tocsr(), vocab=list(vocab), doclen=doclen)

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
    from operators.bm25s_import import load_bm25s

    bm25s = load_bm25s()
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


#: Dense score cells of one block of queries (queries x shard documents): 512 KB of float32, which
#: stays in cache (a 16 MB block made WordNet searches 25% slower).
BLOCK_CELLS = 1 << 17


def query_term_ids(query_tokens: list[list[str]], vocab: dict[str, int]) -> list[np.ndarray]:
    """Each query's term ids in the index vocabulary, in query order, repeats kept and unknown
    tokens dropped: what bm25s's ``get_tokens_ids`` scores."""
    return [np.array([vocab[t] for t in tokens if t in vocab], dtype=np.int64) for tokens in query_tokens]


def search_shard(retriever, query_ids: list[np.ndarray], k: int, allowed: np.ndarray | None):
    """Top ``k`` (rows, scores) per query in one shard, best first; rows outside ``allowed`` and
    scores that are not positive are dropped. Where several rows tie at the k-th score, all of
    them come back (``Index`` breaks ties by docno and keeps k).

    Why not ``BM25.retrieve``: it scores one query at a time in Python (an ``np.add.at`` per
    query term, an ``argpartition`` per query), which on a small corpus costs more than the
    arithmetic. Here a block of queries is scored at once over bm25s's own score matrix: every
    posting of every (query, term) pair is added into one (queries x documents) float32 block
    by a single ``np.add.at``, in query-token order, so each score is the same float32 sum that
    bm25s's ``get_scores`` makes, bit for bit; one row-wise ``np.partition`` finds each query's
    k-th score."""
    n = retriever.scores["num_docs"]
    block = max(1, BLOCK_CELLS // n)
    out = []
    for start in range(0, len(query_ids), block):
        out.extend(_search_block(retriever, query_ids[start:start + block], min(k, n), allowed))
    return out


def _search_block(retriever, query_ids: list[np.ndarray], k: int, allowed: np.ndarray | None):
    data, indices, indptr = retriever.scores["data"], retriever.scores["indices"], retriever.scores["indptr"]
    n, n_queries = retriever.scores["num_docs"], len(query_ids)
    terms = query_ids[0] if n_queries == 1 else np.concatenate(query_ids)
    spans = list(zip(indptr[terms].tolist(), indptr[terms + 1].tolist()))
    if not spans:
        return [(np.zeros(0, np.int64), np.zeros(0))] * n_queries
    # Every posting of every (query, term), query by query in token order, and its cell in the block.
    cells = np.concatenate([indices[a:b] for a, b in spans])
    if n_queries > 1:
        ends = np.cumsum([len(ids) for ids in query_ids]).tolist()
        postings = [sum(b - a for a, b in spans[lo:hi]) for lo, hi in zip([0] + ends[:-1], ends)]
        cells = cells + np.repeat(np.arange(0, n_queries * n, n, dtype=np.int64), postings)
    scores = np.zeros(n_queries * n, dtype=np.float32)
    np.add.at(scores, cells, np.concatenate([data[a:b] for a, b in spans]))
    scores = scores.reshape(n_queries, n)
    if retriever.nonoccurrence_array is not None:  # bm25l / bm25+: every document gets the terms' floor
        scores += np.array([retriever.nonoccurrence_array[ids].sum() for ids in query_ids], np.float32)[:, None]
    if allowed is not None:
        scores[:, ~allowed] = 0
    np.negative(scores, out=scores)  # partition picks the smallest: the best scores, negated
    kth = np.partition(scores, k - 1, axis=1)[:, k - 1:k]
    found = np.flatnonzero((scores <= kth) & (scores < 0))
    values = -scores.ravel()[found].astype(np.float64)
    if n_queries == 1:  # one query per call, the low-latency case: no per-query split
        order = np.lexsort((found, -values))
        return [(found[order], values[order])]
    query, rows = np.divmod(found, n)
    order = np.lexsort((rows, -values, query))
    rows, values = rows[order], values[order]
    bounds = np.searchsorted(query[order], np.arange(n_queries + 1)).tolist()
    return [(rows[a:b], values[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
