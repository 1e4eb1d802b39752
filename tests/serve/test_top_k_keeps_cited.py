"""A search's ``top_k`` cut keeps the rows the flow's answer cites: with ``top_k: 1`` the answer, written from five
documents, named as its source a document the response did not hold ("[2] Aphid" beside the one hit, Bee). A real
local run of the cut spec over the checkout's sample corpus, the model the fault server's."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from flows.executors.local import LocalExecutor
from flows.spec import FlowSpec
from serve.runs.flow_request import with_top_k

CORPUS = Path(__file__).resolve().parents[2] / "data" / "sample" / "corpus.jsonl"


def test_the_cut_keeps_the_answers_cited_rows_beside_the_top_k(fault_models):
    fault_models.reply = "Bees and wasps [3] make honey [2].\nSources: 2, 3"
    spec = FlowSpec.parse({"name": "answers", "steps": {
        "bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": str(CORPUS), "k": 5}},
        "context": {"op": "generate.context"},
        "answer": {"op": "generate.answer", "params": {"model": "fault-ok"}}}})
    result = LocalExecutor().run(with_top_k(spec, 1), pa.table({"qid": ["1"], "query": ["which insects make honey"]}))
    hits = result.table.to_pylist()
    sources = result.metadata["1"]["sources"]
    assert len(sources) == 2 and set(sources) <= {h["docno"] for h in hits}, (sources, hits)
    assert [h["rank"] for h in hits] == [1, 2, 3] and [h["cited"] for h in hits] == [False, True, True]
