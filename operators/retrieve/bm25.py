"""BM25 over an on-disk index built by ``tessera ingest``."""

from __future__ import annotations

from operators.retrieve._index_retriever import IndexRetriever, RetrieverParams


class BM25Retriever(IndexRetriever):
    """Rank the chunks of an on-disk index with BM25 (bm25s scoring, global statistics across shards).

    The index is opened once per process and shared by every step that names it; its
    settings (stemmer, stopwords, k1, b, indexed text fields) decide the tokenisation
    of queries too. Each query gets its top ``k`` chunks with a positive score: rows
    ``qid, query`` (+ the query's other columns), ``docno, doc_id, title, text``, the
    doc store's metadata columns, ``score, rank`` and ``score_<step>``/``rank_<step>``.
    ``filter`` restricts the search to matching chunks (``filter_mode: pre``) or
    filters the top ``k * expand_factor`` afterwards (``post``). The cache key
    includes the index path and manifest generation, so re-ingesting invalidates it.

    Usage::

        BM25Retriever({"index": "scifact", "k": 10})(pa.table({"qid": ["1"], "query": ["honey bees"]}))
    """

    name = "retrieve.bm25"
    aliases = ("bm25",)
    index_features = ("bm25",)  # an index built for this step needs BM25 statistics

    class Params(RetrieverParams):
        pass

    def search(self, texts, k, where):
        return self.index.search_bm25(texts, k, where=where)
