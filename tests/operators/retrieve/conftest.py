"""Fixtures shared by the vector-store retriever tests (Chroma, Qdrant): the documents and numpy's exact answer."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pytest

#: Documents loaded into the Chroma and Qdrant test collections.
N_STORE_DOCS = 300
#: ``exact_search(query, k, mask=None, docs=None) -> (docnos, cosines)``
ExactSearch = Callable[..., "tuple[list[str], np.ndarray]"]


@pytest.fixture(scope="session")
def docs() -> pa.Table:
    """The first 300 sample documents with a made-up ``bucket`` metadata field (0, 1, 2), embedded with
    MiniLM (title + text) once per session."""
    from operators.registry import create
    from operators.testing import sample_documents

    table = sample_documents(N_STORE_DOCS)
    table = table.append_column("bucket", pa.array([i % 3 for i in range(table.num_rows)], pa.int64()))
    return create("embed", {"title_column": "title"})(table)


@pytest.fixture(scope="session")
def exact_search(docs) -> ExactSearch:
    """Top-k docnos and cosines of a query by numpy over ``docs`` (or a slice of it), optionally only where
    ``mask`` holds: what a store's search must return."""
    from operators.embed.sentence_transformer import arrow_to_vectors
    from operators.models import load_sentence_transformer

    def search(query: str, k: int, mask: np.ndarray | None = None, docs: pa.Table = docs):
        scores = arrow_to_vectors(docs.column("vector")) @ load_sentence_transformer().encode(
            [query], normalize_embeddings=True)[0]
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        order = np.argsort(-scores, kind="stable")[:k]
        docnos = docs.column("docno").to_pylist()
        return [docnos[i] for i in order], scores[order]

    return search


@pytest.fixture
def eight_d_docs(docs) -> pa.Table:
    """Ten documents whose vectors are 8-d: a collection the query model (384-d) cannot search."""
    short = docs.slice(0, 10)
    return short.set_column(short.column_names.index("vector"), "vector",
                            pa.FixedSizeListArray.from_arrays(pa.array(np.ones(10 * 8, np.float32)), 8))
