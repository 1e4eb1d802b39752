"""Printing many queries' tables copies the columns it shows, not the documents' text. ``tessera run bm25`` of
10,000 queries over SciFact printed its tables in 3.5 GB where its rows took 2 GB (``--out``): grouping the rows by
query copied the whole result, every hit's text in it, which no table shows. A real BM25 run over the sample
corpus; Arrow's allocations while the tables are printed are measured in a pool of their own."""

from __future__ import annotations

import io

import pyarrow as pa
import yaml
from rich.console import Console

from flows.commands._results import print_results
from tests.flows.test_cli_scripting import CORPUS

SPEC = f"""name: many
steps:
  bm25: {{op: retrieve.corpus_bm25, params: {{corpus: {CORPUS}, k: 50}}, batch_size: 8}}
"""


def test_printing_the_tables_does_not_copy_the_hits_text():
    from flows.api import Flow

    texts = [f"history of {word}" for word in ("music", "science", "war", "art", "cities", "rivers")] * 20
    result = Flow.load(yaml.safe_load(SPEC)).run(texts)
    table = result.table
    assert table.column("text").num_chunks > 1 and table.num_rows > 1000  # a chunk per batch, as a retriever's
    text_bytes = table.column("text").nbytes
    queries = pa.table({"qid": [str(i) for i in range(1, len(texts) + 1)], "query": texts})
    out = Console(file=io.StringIO(), width=120)
    pool = pa.proxy_memory_pool(pa.default_memory_pool())
    before = pa.default_memory_pool()
    pa.set_memory_pool(pool)
    try:
        print_results(out, result, queries, 10)
    finally:
        pa.set_memory_pool(before)
    printed = out.file.getvalue()
    assert printed.count("40 more rows (--top N to show more)") == len(texts), printed[:2000]
    assert pool.max_memory() < text_bytes / 2, (pool.max_memory(), text_bytes)
