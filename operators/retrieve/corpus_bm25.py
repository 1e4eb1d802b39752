"""BM25 over a JSONL corpus loaded in memory: the simple demo ranker."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.atomic import file_sha256
from operators.base import Operator
from operators.errors import OperatorError
from operators.local_files import local_path
from operators.tables import query_rows, ranking_columns, set_ranking

#: The folder above the package: in a clone, the repository root, where relative corpus paths that do not exist
#: under the working directory are looked up, so the default corpus (the bundled sample) is found from any directory.
REPO_ROOT = Path(__file__).resolve().parents[2]


def repo_root() -> Path | None:
    """The repository root in a clone (its bundled sample is there), else None: an installed package's folder above
    is site-packages, which holds no sample (its ``data/`` is another package's), so a missing corpus was said to be
    looked for in site-packages."""
    return REPO_ROOT if (REPO_ROOT / "data" / "sample").is_dir() else None


def resolve_corpus(path: str) -> Path:
    """``path`` as given if it exists (absolute, or relative to the working directory),
    else relative to the repository root of a clone; the first candidate when neither exists."""
    given = Path(path).expanduser()
    if given.is_absolute() or given.exists() or (root := repo_root()) is None:
        return given
    in_repo = root / given
    return in_repo if in_repo.exists() else given


class CorpusBM25Retriever(Operator):
    """Rank a small JSONL corpus with BM25 (bm25s), loaded and indexed in memory: the simple demo ranker.

    This is the demo retriever that makes ``make demo`` work on a fresh clone; the
    real indices (sharded BM25 and dense indices on disk, built by ingestion) come
    later. ``setup()`` reads the corpus (BEIR-style JSONL: ``_id`` (or ``docno``/``id``),
    ``title``, ``text``) and indexes title + text with bm25s, English stopwords and
    the English Snowball stemmer (PyStemmer), words cut as a new index's ``cjk_bigrams`` rule cuts them (Chinese,
    Japanese and Korean runs into pairs of characters: under ``unicode`` a Chinese query found nothing in unspaced
    Chinese rows). Each query gets its top ``k`` documents
    with a positive score: rows ``qid, query, docno, title, text, score, rank`` (+ the
    query's other columns), with ``score_<step>``/``rank_<step>`` copies. A relative
    ``corpus`` path is looked up in the working directory, then, in a clone, in the repository root.
    The cache key includes the corpus file's content hash, so editing the corpus
    invalidates cached results.

    Usage::

        CorpusBM25Retriever({"corpus": "data/sample/corpus.jsonl", "k": 3})(
            pa.table({"qid": ["q1"], "query": ["which insects make honey"]}))
        # 3 rows for q1: docno wv00790 (Bee) first, ...
    """

    name = "retrieve.corpus_bm25"
    version = "2"  # 2: words cut by the "cjk_bigrams" rule (a run of Chinese between punctuation was one word)
    scope = "query"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        corpus: str = Field(
            "data/sample/corpus.jsonl", min_length=1, title="Corpus file", json_schema_extra=local_path(),
            description="JSONL corpus (one document a line: `_id` or `docno` or `id`, `title`, `text`); "
            "relative paths are tried in the working directory, then (in a clone) in the repository root.",
        )
        k: int = Field(10, gt=0, le=10_000, title="Results per query",
                       description="Documents returned per query (at most; only documents matching a query word).",
                       examples=[5, 10, 50, 100])
        index_title: bool = Field(True, title="Index titles", description="Index the title together with the text.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.Lock()

    # -- declared columns ---------------------------------------------------

    def reads(self) -> list[str]:
        return ["qid", "query"]

    def produces(self) -> dict[str, str]:
        return {"docno": "id", "title": "data", "text": "text", **ranking_columns(self.step_id)}

    def cache_identity(self) -> dict[str, Any]:
        identity = super().cache_identity()
        path = resolve_corpus(self.params.corpus)
        identity["corpus_sha256"] = file_sha256(path) if path.is_file() else None
        return identity

    def missing_files(self) -> dict[str, str]:
        path = resolve_corpus(self.params.corpus)
        if path.is_file():
            return {}
        if path.is_dir():  # (it said "corpus file not found" of a folder that is there)
            return {"params.corpus": f"corpus {self.params.corpus} is a folder, not a JSONL file of documents"}
        places = dict.fromkeys([str(Path.cwd()), *([str(root)] if (root := repo_root()) else [])])
        return {"params.corpus": f"corpus file not found: {self.params.corpus} (looked in {' and '.join(places)})"}

    # -- lifecycle ----------------------------------------------------------

    def setup(self) -> None:
        if getattr(self, "_retriever", None) is not None:
            return
        from operators.bm25s_import import load_bm25s

        bm25s = load_bm25s()
        for field, why in self.missing_files().items():
            raise OperatorError(why, op=self.name, step=self.step_id, field=field)
        path = resolve_corpus(self.params.corpus)
        from operators.sources.jsonl import JsonlSource

        docs = JsonlSource({"path": str(path), "fields": []}, step_id=self.step_id)(pa.table({}))
        docnos = docs.column("docno").to_pylist()
        titles = [t or "" for t in (docs.column("title").to_pylist() if "title" in docs.column_names
                                    else [""] * docs.num_rows)]
        texts = [t or "" for t in docs.column("text").to_pylist()]
        if not docnos:
            raise OperatorError(f"corpus {path} holds no documents", op=self.name, step=self.step_id,
                                field="params.corpus")
        from operators.store.bm25 import query_tokenizer  # words as a new index's "cjk_bigrams" tokens cut them

        tokenizer = query_tokenizer("en", "english", "cjk_bigrams")
        corpus_tokens = tokenizer([f"{t}\n{x}" if self.params.index_title else x for t, x in zip(titles, texts)])
        retriever = bm25s.BM25()
        retriever.index(corpus_tokens, show_progress=False)
        self._docs = pa.table({"docno": docnos, "title": titles, "text": texts},
                              schema=pa.schema([("docno", pa.string()), ("title", pa.string()),
                                                ("text", pa.string())]))
        self._tokenizer = tokenizer
        self._retriever = retriever

    # -- running ------------------------------------------------------------

    def transform(self, table: pa.Table) -> pa.Table:
        owned = set(self.produces())  # input columns of the same names are replaced
        queries = query_rows(table, owned)
        n_docs = self._docs.num_rows
        rows = np.zeros(0, dtype=np.int64)
        docs = np.zeros(0, dtype=np.int64)
        scores = np.zeros(0, dtype=np.float64)
        if queries.num_rows:
            with self._lock:  # the PyStemmer stemmer inside the tokenizer is not thread-safe
                words = self._tokenizer([q or "" for q in queries.column("query").to_pylist()])
            # only known words: bm25s's empty token, which every document of stopwords alone holds, is none of them
            # ("To be or not to be." was the first hit of "zebra"): a query of none finds nothing
            vocab = self._retriever.vocab_dict
            ids = [[vocab[w] for w in query if w and w in vocab] for query in words]
            asked = [n for n, query in enumerate(ids) if query]
            if asked:
                found, found_scores = self._retriever.retrieve([ids[n] for n in asked], k=min(self.params.k, n_docs),
                                                               show_progress=False)
                keep = found_scores > 0  # a document that matches no query word is not a result
                rows = np.asarray(asked, dtype=np.int64)[np.nonzero(keep)[0]]
                docs = found[keep].astype(np.int64)
                scores = found_scores[keep].astype(np.float64)
        out = queries.take(pa.array(rows, pa.int64()))
        hits = self._docs.take(pa.array(docs, pa.int64()))
        for name in ("docno", "title", "text"):
            out = out.append_column(name, hits.column(name))
        return set_ranking(out, pa.array(scores, pa.float64()), self.step_id)
