"""Which mined examples each model kind trains on, the check that a kind has judged ones, and its own counts.

Mining's examples are judged ones (a query of the training split and a document its qrels
call relevant) followed by pseudo-queries (``"synthetic": True``), which only the kinds
in ``synthetic.kinds`` read. So a run can mine examples and still leave a kind with none
(every qrel naming a document the corpus lacks, with pseudo-queries for the cross-encoder
only): that kind is refused before anything trains, instead of a checkpoint saved from zero
steps; one that has examples of a single query is warned about (no step can teach it anything). What each
kind trained on is recorded and printed per model, as its own numbers
(its examples, its queries, the negatives its trainer reads), not mining's totals.
"""

from __future__ import annotations

from typing import Any, Callable

from pydantic import BaseModel

from flows.train.errors import TrainError


def own_examples(kind: str, examples: list[dict[str, Any]], synthetic_kinds: list[str]) -> list[dict[str, Any]]:
    """The examples ``kind`` trains on: every judged one, and pseudo-queries when ``kind`` is in ``synthetic_kinds``."""
    return [e for e in examples if not e.get("synthetic") or kind in synthetic_kinds]


def check_judged(own: dict[str, list[dict[str, Any]]], mining: dict[str, Any], log: Callable[[str], None]) -> None:
    """Refuse (one line) a kind with no example at all; warn when one trains on pseudo-queries alone."""
    from flows.train.mining import no_judged_reason

    for kind, examples in own.items():
        if any(not e.get("synthetic") for e in examples):
            continue
        why = no_judged_reason(mining, mining.get("split", "train"))
        if not examples:
            raise TrainError(f"{kind}: no judged example: {why}; nothing to train it on", field="dataset")
        log(f"warning: {kind} trains on {len(examples)} pseudo-queries alone, with no judged example ({why}): it "
            "learns the corpus's own sentences, not your queries")


#: The fewest queries a kind's examples come from for a step to teach anything. A batch never holds one query
#: twice (``_loop.batches``; ColBERT's batches are its examples in turn) and each example's positive is ranked
#: against the other examples' documents in its batch (the in-batch negatives, why ``batch_size`` is above 1):
#: with one query each step is that one example alone, ranked against its own hard negatives at most.
MIN_QUERIES = 2


def warn_too_few(own: dict[str, list[dict[str, Any]]], log: Callable[[str], None]) -> None:
    """Warn, before anything trains, for each kind whose examples come from fewer than ``MIN_QUERIES`` queries: the
    run still trains it (a smoke test of the data and the recipe), but the checkpoint is not a useful model."""
    for kind, examples in own.items():
        queries = len({e["query"] for e in examples})
        if examples and queries < MIN_QUERIES:
            log(f"warning: {kind} trains on {len(examples)} example{'' if len(examples) == 1 else 's'} from "
                f"{queries} query: each step sees it alone, with no other query's document to rank below its "
                f"positive, so the checkpoint learns next to nothing; judge at least {MIN_QUERIES} queries "
                "(hundreds for a useful model)")


def counts(kind: str, params: BaseModel, examples: list[dict[str, Any]], mining: dict[str, Any]) -> dict[str, Any]:
    """What ``kind`` trained on: its examples (judged and pseudo), the judged queries they come from, and the hard
    negatives its trainer reads per example (its own ``negatives``, at most what mining drew)."""
    judged = [e for e in examples if not e.get("synthetic")]
    mined = mining["params"]["negatives"]
    return {"examples": len(examples), "judged_examples": len(judged), "pseudo_examples": len(examples) - len(judged),
            "queries": len({e["qid"] for e in judged}),
            "negatives_per_example": min(getattr(params, "negatives"), mined), "mined_negatives_per_example": mined}


def describe(record_counts: dict[str, Any]) -> str:
    """``counts`` in words, for the summary: "80 examples (60 judged from 40 queries, 20 pseudo), 3 negatives each"."""
    if "judged_examples" not in record_counts:  # a checkpoint recorded by an older Tessera
        return f"{record_counts.get('examples', '?')} examples"
    pseudo = f", {record_counts['pseudo_examples']} pseudo" if record_counts["pseudo_examples"] else ""
    negatives = record_counts["negatives_per_example"]
    return (f"{record_counts['examples']} examples ({record_counts['judged_examples']} judged from "
            f"{record_counts['queries']} queries{pseudo}), {negatives} negative{'' if negatives == 1 else 's'} each")
