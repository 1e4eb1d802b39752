"""The index's own BM25 query path (batched scoring, query tokenizer) answers exactly what
bm25s's per-query ``get_scores`` and ``bm25s.tokenize`` answer, on the sample corpus."""

from __future__ import annotations

import bm25s
import numpy as np
import pyarrow as pa
import pytest
import Stemmer

from operators.store import Index, IndexSettings, bm25

EDGE_QUERIES = ["", "   ", "the of and", "bees bees bees honey", "zzzqqq unknownword", "Ünïcödé straße café 日本語",
                "北京烤鸭是中国著名的菜肴。東京タワーは東京都港区、高さ3776メートル 猫 서울에서 a日b 々ー",
                "Ａｂｃ ｶﾀｶﾅ",
                "x1 y2 __init__ foo_bar 3.14 C++", "THE Bees' knees!!!", "a",
                "हिन्दी भारत की மொழி القَاهِرَةُ inter\u00adnational hello\u200bworld km² \ufeffbom İstanbul IĞDIR"]


def _pairs_pattern() -> str:
    """"cjk_bigrams" as one bm25s pattern, written apart from the tokenizer's: at each place, the pair of CJK
    characters that starts there, a CJK character alone between others, or a run of other word characters or marks
    that starts there (a lookahead's group: findall gives the overlapping pairs)."""
    from operators.store.cjk import cjk_characters
    from operators.unicode import character_class, code_point_class

    cjk = character_class(cjk_characters())  # the characters, not the tokenizer's own patterns
    word = f"(?:[^\\W{cjk}]|[{code_point_class('M')}])"
    return f"(?=([{cjk}]{{2}}|(?<![{cjk}])[{cjk}](?![{cjk}])|(?<!{word}){word}{{2,}}))"


#: The token rules of an index (``IndexSettings.tokens``), each held to bm25s with its own pattern.
RULES = {"cjk_bigrams": _pairs_pattern(), "unicode": bm25.marked_pattern(), "bm25s": bm25.TOKEN_PATTERN}


def _as_indexed(texts, settings):
    """The texts bm25s is given to tokenize as the index reads them (``bm25.normalized``: composed, lower-cased, and
    under "unicode" without the invisible characters inside words and with Turkish's i folded)."""
    return [bm25.normalized(t, settings.tokens) for t in texts]


@pytest.mark.parametrize("settings", [IndexSettings(), IndexSettings(stemmer=None), IndexSettings(stopwords=None),
                                      IndexSettings(stopwords=["war", "river"]),
                                      IndexSettings(stopwords="de", stemmer="german"), IndexSettings(tokens="bm25s"),
                                      IndexSettings(tokens="unicode")],
                         ids=["en", "no-stemmer", "no-stopwords", "stopword-list", "german", "bm25s-tokens",
                              "unicode-tokens"])
def test_query_tokens_are_those_of_bm25s_tokenize(settings, sample_docs):
    texts = [d["title"] for d in sample_docs] + [d["text"][:300] for d in sample_docs[:300]] + EDGE_QUERIES
    stemmer = Stemmer.Stemmer(settings.stemmer) if settings.stemmer else None
    expected = bm25s.tokenize(_as_indexed(texts, settings), token_pattern=RULES[settings.tokens],
                              stopwords=settings.stopwords or None, stemmer=stemmer, return_ids=False,
                              show_progress=False)
    assert bm25.tokenize_queries(texts, settings) == expected


@pytest.mark.parametrize("settings", [IndexSettings(), IndexSettings(stemmer=None, stopwords=None),
                                      IndexSettings(stopwords="de", stemmer="german"), IndexSettings(tokens="bm25s"),
                                      IndexSettings(tokens="unicode")],
                         ids=["en", "bare", "german", "bm25s-tokens", "unicode-tokens"])
def test_shard_term_counts_are_those_of_bm25s_indexing(settings, sample_docs):
    """Tokenizing each distinct space-separated piece once gives bm25s's own document tokens."""
    from bm25s.tokenization import Tokenizer

    texts = [f"{d['title']} {d['text']}" for d in sample_docs[:300]] + EDGE_QUERIES + ["ΟΔΟΣ ΟΔΟΣ.  Σ", "a\tb\nthe"]
    stemmer = Stemmer.Stemmer(settings.stemmer) if settings.stemmer else None
    tokens = Tokenizer(splitter=RULES[settings.tokens], stopwords=settings.stopwords or None, stemmer=stemmer).tokenize(
        _as_indexed(texts, settings), update_vocab=True, return_as="string", show_progress=False)
    terms = bm25.ShardTerms.of_texts(pa.array(texts), settings)
    got = [sorted((terms.vocab[c], int(n)) for c, n in zip(terms.tf[i].indices, terms.tf[i].data))
           for i in range(len(texts))]
    assert got == [sorted({t: d.count(t) for t in d}.items()) for d in tokens]
    assert terms.doclen.tolist() == [len(d) for d in tokens]


def _bm25s_top(retriever, tokens: list[str], k: int, mask: np.ndarray | None):
    """bm25s's own scores for one query (its ``get_scores``), the positive ones, best first."""
    ids = retriever.get_tokens_ids(tokens)
    if not ids:
        return {}
    scores = retriever.get_scores(ids, weight_mask=None if mask is None else mask.astype(np.float32))
    return {int(r): scores[r] for r in np.flatnonzero(scores > 0)}


@pytest.mark.parametrize("method", ["lucene", "bm25l", "bm25+", "atire"])
def test_batched_search_scores_bit_for_bit_like_bm25s(tmp_path, sample_docs, make_chunks, monkeypatch, method):
    index = Index.create(tmp_path / "idx", IndexSettings(dense=False, method=method))
    index.add(make_chunks(sample_docs[:400]))
    queries = [d["title"] for d in sample_docs[::23]] + [sample_docs[5]["text"][:200]] + EDGE_QUERIES
    state = index._current()
    index.search_bm25(["warm"], k=1)
    retriever = state.retrievers[0]
    tokens = bm25.tokenize_queries(queries, index.settings)
    ids = bm25.query_term_ids(tokens, retriever.vocab_dict)
    allowed = np.random.default_rng(0).random(400) < 0.5
    monkeypatch.setattr(bm25, "BLOCK_CELLS", 400 * 7)  # blocks of 7 queries: several blocks in one call
    for k, mask in ((10, None), (5, allowed), (1000, None)):
        found = bm25.search_shard(retriever, ids, k, mask)
        assert len(found) == len(queries)
        for query, toks, (rows, scores) in zip(queries, tokens, found):
            expected = _bm25s_top(retriever, toks, k, mask)
            top = sorted(expected.values(), reverse=True)[:k]
            assert len(rows) >= len(top), query
            # The same float32 sums as bm25s (not merely close), best first, ties by row.
            assert np.array_equal(np.float32(scores[:len(top)]), np.float32(top)), query
            assert all(np.float32(scores[i]) == expected[int(r)] for i, r in enumerate(rows)), query
            assert list(zip(-scores, rows)) == sorted(zip(-scores, rows)), query
            extra = scores[len(top):]  # only rows tied with the k-th score come on top of k
            assert not len(extra) or (len(top) == k and np.all(np.float32(extra) == np.float32(top[-1]))), query
            if mask is not None:
                assert mask[rows].all(), query
        # One query per call skips the per-query split: the same answers.
        for ids_one, (rows, scores) in zip(ids, found):
            [(rows_one, scores_one)] = bm25.search_shard(retriever, [ids_one], k, mask)
            assert np.array_equal(rows_one, rows) and np.array_equal(scores_one, scores)


def test_rows_tied_at_the_kth_score_are_broken_by_docno(tmp_path):
    index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    texts = ["honey bees make honey"] * 6 + ["bees"] + ["war and peace"] * 3
    docnos = ["d9", "d3", "d7", "d1", "d8", "d5", "d0", "w1", "w2", "w3"]
    index.add(pa.table({"docno": docnos, "doc_id": docnos, "title": [""] * 10, "text": texts}))
    hits = index.search_bm25(["honey bees"], k=3)[0]
    assert hits.docnos == ["d1", "d3", "d5"]  # six equal scores: the three smallest docnos
    assert len(set(hits.scores.tolist())) == 1
    assert index.search_bm25(["honey bees"], k=7)[0].docnos == ["d1", "d3", "d5", "d7", "d8", "d9", "d0"]


def test_a_word_written_with_a_combining_accent_is_found_as_the_precomposed_word(tmp_path):
    """``e`` + U+0301 (macOS file names, some PDFs) split the token at the mark: ``cafe\\u0301`` was indexed as
    ``cafe`` and a query for ``café`` found only the document that wrote it precomposed, ``cafe`` only the other."""
    import unicodedata

    index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    texts = ["caf\u00e9 latte in Z\u00fcrich", "cafe\u0301 mocha in Zu\u0308rich", "plain cafe"]
    index.add(pa.table({"docno": ["pre", "dec", "plain"], "doc_id": ["pre", "dec", "plain"], "title": [""] * 3,
                        "text": texts}))
    for query in ("caf\u00e9", "cafe\u0301", "Z\u00fcrich", "Zu\u0308rich"):
        assert sorted(index.search_bm25([query], k=5)[0].docnos) == ["dec", "pre"], query
    assert index.search_bm25(["cafe"], k=5)[0].docnos == ["plain"]
    assert bm25.tokenize_queries(["Zu\u0308rich"], IndexSettings()) == [[unicodedata.normalize("NFC", "zürich")]]


def test_text_fields_naming_no_column_of_the_chunks_is_refused_naming_them(tmp_path):
    """It was an internal TypeError ('pyarrow.lib.StringScalar' object is not iterable) from Arrow's join of no
    column, through `tessera ingest` too."""
    import pyarrow as pa

    from operators.store import Index, IndexSettings, IndexStoreError

    index = Index.create(tmp_path / "idx", IndexSettings(dense=False, text_fields=["body"]))
    with pytest.raises(IndexStoreError) as refused:
        index.add(pa.table({"docno": ["a"], "doc_id": ["a"], "text": ["honey bees"]}))
    assert refused.value.field == "text_fields" and "none of the index's BM25 text_fields ['body'] is a column" \
        in refused.value.message and len(Index.open(index.path)) == 0
