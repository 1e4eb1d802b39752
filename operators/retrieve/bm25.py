"""BM25 over an on-disk index built by ``tessera ingest``."""

from __future__ import annotations

import logging

from operators.error_text import see_docs
from operators.retrieve._index_retriever import IndexRetriever, RetrieverParams
from operators.unicode import whole_characters

log = logging.getLogger(__name__)


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
        hits = self.index.search_bm25(texts, k, where=where)
        unfound = [text for text, found in zip(texts, hits) if len(found) == 0]
        self._note_termless(unfound)
        self._note_whole_runs(unfound)
        return hits

    def _note_whole_runs(self, unfound: list[str]) -> None:
        """Say why a Chinese, Japanese or Korean query found nothing in an index made before 'cjk_bigrams': it
        keeps its tokens rule, under which such a run is one word, so a word inside a run is not found ('烤鸭' in
        '北京烤鸭是…'), nor one in a document added to it since. Without it the index read as lacking the subject."""
        from operators.store.cjk import has_cjk

        tokens = self.index.settings.tokens
        if tokens == "cjk_bigrams" or not (written := [text for text in unfound if has_cjk(text)]):
            return
        more = len(written) - 1
        others = f" (and {more} more {'query' if more == 1 else 'queries'})" if more else ""
        log.warning("%s: BM25 found nothing for %r%s: this index cuts words by its tokens rule %r (made before "
                    "'cjk_bigrams'), under which a Chinese, Japanese or Korean word is found only as a whole run "
                    "between punctuation or spaces; to find words inside such text, ingest its source into a new "
                    "index (%s)", self.step_id, whole_characters(written[0], 80), others, tokens,
                    see_docs("indices", "BM25 shards"), extra={"note": True})

    def _note_termless(self, unfound: list[str]) -> None:
        """Say why a query found nothing when the reason is its own words: every one a stopword of the index or
        shorter than a term, so BM25 had nothing to look for ("the of and"). Without it such a query read as
        "no results", as if the index lacked the subject."""
        from operators.store.bm25 import tokenize_queries

        if not unfound:
            return
        settings = self.index.settings
        termless = [text for text, tokens in zip(unfound, tokenize_queries(unfound, settings)) if not tokens]
        if termless:
            stopwords = settings.stopwords if isinstance(settings.stopwords, str) else "the index's list"
            more = len(termless) - 1
            others = f" (and {more} more {'query' if more == 1 else 'queries'})" if more else ""
            why = (f"each one a stopword (stopwords: {stopwords or 'none'}) or a single character"
                   if any(char.isalnum() for char in termless[0]) else
                   "not a letter or digit in it (emoji, symbols and punctuation are no words)")
            log.warning("%s: BM25 found nothing for %r%s: it has no word BM25 searches for, %s", self.step_id,
                        whole_characters(termless[0], 80), others, why, extra={"note": True})
