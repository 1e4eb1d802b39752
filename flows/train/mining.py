"""Hard-negative mining with Tessera's own retrieval, over a dataset's training queries.

For every judged query of the training split, a retrieval flow (by default the
mining steps of ``flows/train/recipes/train.yaml``: BM25 and dense, fused with RRF) runs
over an index of the dataset's corpus, built or reused exactly as ``tessera bench``
does (``flows.bench.indices``: ``$TESSERA_HOME/indices/auto``, keyed by content).
The retrieved documents that are not judged relevant for that query are its hard
negatives; the first ``skip_top`` ranks can be left out, because the documents
ranked highest without a judgement are the likeliest unjudged positives.

Further labelled sets (``more``: ``tessera train --dataset A --dataset B``, or a
recipe's ``training.datasets``) are mined the same way, each on its own index, and
their examples follow the first set's, so one model can learn from several domains.

One example per (query, relevant document): ``{"query", "positive", "negatives"}``,
texts as the rerankers see them (``title + "\\n" + text``, see
``operators.rerank.base.Reranker.candidate_texts``), plus ``qid`` and the doc ids.
The negatives are a sample of ``negatives`` candidates drawn with a generator
seeded by ``(seed, qid)``, listed in rank order, so mining is deterministic and
does not depend on the order of the queries.

Only training data is read: the splits named in ``flows.train.splits.EVALUATION_SPLITS`` are refused
unless ``allow_eval_split`` says the set is a training set whose only qrels file
happens to be called ``test.tsv`` (the HotpotQA and MuSiQue ``train100`` sets).
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from flows.train.corpus import check_corpus, corpus_texts
from flows.train.errors import TrainError
from flows.train.splits import LabelledSet, load_training_split

if TYPE_CHECKING:
    from flows.train.synthetic import SyntheticParams

#: The counts of each labelled set that the mining record sums over the sets.
_SUMMED = ("judged_positives", "positives_missing_from_corpus", "positives_without_negatives",
           "queries_with_fewer_negatives", "qrels_queries_not_in_queries")


class MiningParams(BaseModel):
    """How hard negatives are chosen from the retrieved candidates."""

    model_config = ConfigDict(extra="forbid")

    skip_top: int = Field(0, ge=0, description="Leave out the first N retrieved ranks of each query (likely "
                          "unjudged positives).")
    negatives: int = Field(7, gt=0, description="Hard negatives per example (fewer when fewer were retrieved).")
    seed: int = Field(0, description="Seed of the negative sampling (per query: seed and qid).")


@dataclass
class Mined:
    """The examples and what mining did."""

    examples: list[dict[str, Any]]
    stats: dict[str, Any] = field(default_factory=dict)


def _index_root(index_dir: str | Path | None) -> Path:
    """The folder mining's indices go to, refused before any work when it or a folder above it is a file:
    ``--index-dir`` naming a file was an internal error (``FileExistsError``) once the training split was read."""
    from flows.bench import indices

    root = Path(index_dir).expanduser() if index_dir else indices.default_root()
    blocking = next((p for p in (root, *root.parents) if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        under = "" if blocking == root else f" (under {blocking}, a file)"
        where = f"--index-dir {root}" if index_dir else f"the index folder {root}"
        raise TrainError(f"{where} is not a folder{under}: give --index-dir a folder for mining's indices "
                         "(made if missing)", field="index_dir")
    return root


def mine(dataset: str | Path, flow: Any, *, split: str = "train", params: MiningParams | None = None,
         max_queries: int | None = None, allow_eval_split: bool = False, index_dir: str | Path | None = None,
         synthetic: SyntheticParams | None = None, more: Sequence[tuple[LabelledSet, str]] = (),
         log: Callable[[str], None] = print, progress: bool = True, max_examples: int | None = None) -> Mined:
    """Mine examples for ``split`` of the BEIR folder ``dataset`` with the retrieval ``flow``.

    ``flow``: a ``FlowSpec`` (or a spec name/path) whose retrieve steps leave ``index``
    unset; the index is built from the corpus on first use and reused afterwards.
    ``max_queries`` keeps the first N judged queries (file order) of each set. ``more``
    adds the judged examples of further labelled sets, each mined on its own index: pairs of
    a ``LabelledSet`` and the prefix of its error fields (``training.datasets.0``, or empty
    for a repeated ``--dataset``, whose errors name ``dataset`` and ``split``).
    ``synthetic`` (``flows.train.synthetic.SyntheticParams``) adds pseudo-queries drawn
    from the first set's corpus, mined the same way, and from each of its ``corpora`` on
    that corpus's own index; their examples carry ``"synthetic": True``. ``max_examples``: the examples the caller
    keeps (the judged first): pseudo-queries are mined only until they fill what the judged ones leave.
    """
    from flows.result import counted
    from flows.spec import FlowSpec

    params = params or MiningParams()
    started = time.perf_counter()
    root = _index_root(index_dir)
    others = [(other, _other_corpus(other, number)) for number, other in enumerate(synthetic.corpora)] \
        if synthetic is not None else []  # a missing corpus or dataset fails before any mining
    _check_distinct(dataset, split, more)
    sets = [load_training_split(dataset, split, limit=max_queries, allow_eval_split=allow_eval_split)]
    sets += [load_training_split(m.dataset, m.split, limit=max_queries, allow_eval_split=m.allow_eval_split,
                                 where=where) for m, where in more]
    _check_corpora([(data.corpus, f"{where}.dataset" if where else "dataset")
                    for data, where in zip(sets, ["", *(where for _, where in more)])]
                   + [(path, f"training.synthetic.corpora.{n}.corpus") for n, (_, path) in enumerate(others)], log)
    unindexed = flow if isinstance(flow, FlowSpec) else FlowSpec.load(flow)

    def on_index(corpus: Path, corpus_sha256: str) -> tuple[Any, Any]:
        return _on_index(unindexed, corpus, corpus_sha256, root, log=log, progress=progress)

    indexed = [on_index(data.corpus, data.corpus_sha256()) for data in sets]
    examples, labelled = _mine_labelled(sets, indexed, params, log)
    spec = indexed[0][0]
    room = None if max_examples is None else max(max_examples - len(examples), 0)
    pseudo, by_corpus = _mine_synthetic(sets[0].corpus, spec, synthetic, others, on_index, params, log, room)
    examples += pseudo
    summed = {name: sum(s[name] for s in labelled) for name in _SUMMED}
    if not examples:
        where = ", ".join(f"{data.root} ({data.split})" for data in sets)
        raise TrainError(f"mining found no example in {where}: {no_judged_reason(summed, split)}", field="dataset")
    stats = {**labelled[0], "queries": sum(s["queries"] for s in labelled), "examples": len(examples), **summed,
             "pseudo_queries": len(pseudo), "pseudo_queries_by_corpus": by_corpus,
             "synthetic": synthetic.model_dump() if synthetic is not None else None,
             "flow": spec.name, "params": params.model_dump(), "seconds": round(time.perf_counter() - started, 3)}
    if more:
        stats["datasets"] = labelled
    log(f"mined {len(examples)} examples ({len(examples) - len(pseudo)} judged, {len(pseudo)} from pseudo-queries) "
        f"from {counted(stats['queries'], 'query', 'queries')} in {stats['seconds']:.1f} s")
    return Mined(examples=examples, stats=stats)


def _mine_labelled(sets: list[Any], indexed: list[tuple[Any, Any]], params: MiningParams,
                   log: Callable[[str], None]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The judged examples of every set, each mined on its own index, and one record of each set."""
    examples: list[dict[str, Any]] = []
    labelled: list[dict[str, Any]] = []
    for data, (on_index, plan) in zip(sets, indexed):
        log(f"mining {data.name} ({data.split}): {len(data.qids)} queries, {data.qrels.num_rows} judgements, "
            f"flow '{on_index.name}'")
        judged, counts = _mine_judged(data, on_index, params)
        counts["qrels_queries_not_in_queries"] = data.missing
        _warn_unmatched(data, counts, log)
        examples += judged
        labelled.append({"dataset": os.path.abspath(data.root), "split": data.split, "queries": len(data.qids),
                         "examples": len(judged), **counts, "index": plan.key if plan else None,
                         "corpus_sha256": data.corpus_sha256(), "queries_sha256": data.queries_fingerprint(),
                         "qrels_sha256": data.qrels_fingerprint()})
    return examples, labelled


def _mine_synthetic(corpus: Path, spec: Any, synthetic: SyntheticParams | None, others: list[tuple[Any, Path]],
                    on_index: Callable[[Path, str], tuple[Any, Any]], params: MiningParams,
                    log: Callable[[str], None], room: int | None = None) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Examples from pseudo-queries of the first set's ``corpus`` (on ``spec``, its index) and of each further
    corpus (on that corpus's own index), and how many each corpus gave; at most ``room`` (None: all)."""
    from operators.atomic import file_sha256

    own = synthetic is not None and synthetic.queries > 0
    if room == 0 and (own or others):
        log("the judged examples fill the examples kept (max_examples): no pseudo-query is mined")
        return [], {}
    pseudo = _mine_pseudo(corpus, spec, synthetic, params, room) if own else []
    by_corpus = {os.path.abspath(corpus): len(pseudo)} if own else {}
    for other, other_corpus in others:
        if room is not None and len(pseudo) >= room:
            break
        other_spec, _ = on_index(other_corpus, file_sha256(other_corpus))
        drawn = _mine_pseudo(other_corpus, other_spec, synthetic.for_corpus(other), params,
                             None if room is None else room - len(pseudo))
        log(f"drew {len(drawn)} pseudo-queries from {other_corpus}")
        key = os.path.abspath(other_corpus)
        by_corpus[key] = by_corpus.get(key, 0) + len(drawn)
        pseudo += drawn
    return pseudo, by_corpus


def no_judged_reason(counts: dict[str, Any], split: str) -> str:
    """Why no judged example came out of mining, in words, from the summed counts of the sets."""
    judged, missing = counts.get("judged_positives", 0), counts.get("positives_missing_from_corpus", 0)
    if not judged:
        return f"no qrel of the {split} split has a relevance above 0"
    if missing == judged:
        return f"every {split} qrel names a document the corpus lacks ({missing} of {judged})"
    return (f"no judged query has both a relevant document in the corpus and a retrieved non-relevant one "
            f"({missing} of {judged} {split} qrels name a document the corpus lacks; the other "
            f"{judged - missing} retrieved no negative)")


def _check_corpora(corpora: list[tuple[Path, str]], log: Callable[[str], None]) -> None:
    """Every corpus read (``(path, field)``) is JSONL with documents, before any index is built; a repeated id
    is a warning (the first copy is used, as ingestion does)."""
    for corpus, where in corpora:
        repeated = check_corpus(corpus, field=where)
        if repeated:
            log(f"warning: {corpus} repeats {repeated} document id(s): mining reads the first copy of each, as "
                "ingestion does; give each document its own id")


def _warn_unmatched(data: Any, counts: dict[str, Any], log: Callable[[str], None]) -> None:
    """Judgements that cannot become examples are warned about, not only counted in training.json: ids that
    differ between the files (``7`` against ``007``, a prefix) are the usual cause."""
    qrels = data.root / "qrels" / f"{data.split}.tsv"
    if counts["positives_missing_from_corpus"]:
        shown = ", ".join(repr(d) for d in counts["missing_examples"])
        log(f"warning: {counts['positives_missing_from_corpus']} of {counts['judged_positives']} relevant "
            f"judgements in {qrels} name a document that is not in {data.corpus} (such as {shown}): they give no "
            "example; check that the qrels' corpus-id column uses the corpus's _id values (the same string: "
            "not 7 for '007', no prefix)")
    if counts["positives_without_negatives"]:
        log(f"warning: {counts['positives_without_negatives']} of {counts['judged_positives']} relevant judgements "
            f"in {qrels} give no example: the mining flow retrieved no other document for their query, so there is "
            "no hard negative to train against; raise its k (BM25 returns only documents sharing a word with the "
            "query) or give the corpus more documents")
    if data.missing:
        log(f"warning: {data.missing} query id(s) judged in {qrels} are not in {data.root / 'queries.jsonl'}: "
            "their judgements are not used; check that the qrels' query-id column uses the queries' _id values "
            "(the same string: not 7 for '007', no prefix)")


def _check_distinct(dataset: str | Path, split: str, more: Sequence[tuple[LabelledSet, str]]) -> None:
    """A set given twice would train on each of its examples twice: name the second mention."""
    seen = {(Path(dataset).expanduser().resolve(), split)}
    for m, where in more:
        key = (Path(m.dataset).expanduser().resolve(), m.split)
        if key in seen:
            raise TrainError(f"dataset {m.dataset} ({m.split}) is given twice: its examples would count twice",
                             field=f"{where}.dataset" if where else "dataset")
        seen.add(key)


def _mine_judged(data: Any, spec: Any, params: MiningParams) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """One example per judged (query, relevant document) of ``data``, with its retrieved non-relevant negatives."""
    ranked = _retrieve(spec, data.queries)
    positives: dict[str, list[str]] = {}
    for qid, docno, relevance in zip(*(data.qrels.column(c).to_pylist() for c in ("qid", "docno", "relevance"))):
        if relevance > 0:
            positives.setdefault(qid, []).append(docno)
    wanted = {d for docs in positives.values() for d in docs} | {d for docs in ranked.values() for d in docs}
    texts = corpus_texts(data.corpus, wanted)
    examples, missing, short, unmatched = [], [], 0, 0
    for qid, query in zip(data.qids, data.queries.column("query").to_pylist()):
        negatives = _negatives(qid, ranked, set(positives.get(qid, ())), texts, params)
        if len(negatives) < params.negatives:
            short += 1
        for docno in positives.get(qid, []):
            if docno not in texts:
                missing.append(docno)
                continue
            if not negatives:
                unmatched += 1
                continue
            examples.append({"qid": qid, "query": query, "positive_id": docno, "positive": texts[docno],
                             "negative_ids": negatives, "negatives": [texts[d] for d in negatives]})
    counts = {"judged_positives": sum(map(len, positives.values())), "positives_missing_from_corpus": len(missing),
              "positives_without_negatives": unmatched, "queries_with_fewer_negatives": short}
    return examples, {**counts, "missing_examples": sorted(set(missing))[:3]}


def _on_index(spec: Any, corpus: Path, corpus_sha256: str, root: Path, *, log: Callable[[str], None],
              progress: bool) -> tuple[Any, Any]:
    """``spec`` with its retrieve steps on ``corpus``'s index (built on first use, as ``tessera bench`` does)."""
    from flows.bench import indices

    plan = indices.plan_index(spec, corpus_sha256, root)
    if plan is None:
        return spec, None
    indices.ensure_index(plan, corpus, executor="local", log=log, progress=progress)
    return spec.with_index(str(plan.path)), plan


def _other_corpus(other: Any, number: int) -> Path:
    """The corpus.jsonl of an entry of ``synthetic.corpora``; a clear error when it is not there."""
    corpus = other.corpus_file()
    if not corpus.is_file():
        raise TrainError(f"no corpus at {other.corpus} (looked for {corpus.absolute()}): give a BEIR-layout folder "
                         "or a corpus.jsonl file", field=f"training.synthetic.corpora.{number}.corpus")
    return corpus


def _negatives(qid: str, ranked: dict[str, list[str]], relevant: set[str], texts: dict[str, str],
               params: MiningParams) -> list[str]:
    """A seeded sample of the query's retrieved, non-relevant documents (past ``skip_top``), in rank order."""
    pool = [d for d in ranked.get(qid, [])[params.skip_top:] if d not in relevant and d in texts]
    rng = random.Random(_seed(params.seed, qid))
    return [pool[i] for i in sorted(rng.sample(range(len(pool)), min(params.negatives, len(pool))))]


def _mine_pseudo(corpus: Path, spec: Any, synthetic: SyntheticParams, params: MiningParams,
                 room: int | None = None) -> list[dict[str, Any]]:
    """Examples from pseudo-queries (``flows.train.synthetic``): the source document is the only positive. With
    ``room``, the first ``room`` examples only: the pseudo-queries are searched a batch at a time until they give
    as many (a query whose search finds no negative gives none), the same examples as all of them would begin
    with."""
    import pyarrow as pa

    from flows.train.synthetic import pseudo_queries

    pseudo, examples, start = pseudo_queries(corpus, synthetic), [], 0
    while start < len(pseudo) and (room is None or len(examples) < room):
        batch = pseudo[start:] if room is None else pseudo[start:start + room - len(examples)]
        start += len(batch)
        ranked = _retrieve(spec, pa.table({"qid": [p.qid for p in batch], "query": [p.query for p in batch]}))
        texts = corpus_texts(corpus, {d for docs in ranked.values() for d in docs})
        for p in batch:
            negatives = _negatives(p.qid, ranked, {p.docno}, texts, params)
            if negatives:
                examples.append({"qid": p.qid, "query": p.query, "positive_id": p.docno, "positive": p.positive,
                                 "negative_ids": negatives, "negatives": [texts[d] for d in negatives],
                                 "synthetic": True})
    return examples


def _seed(seed: int, qid: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}\t{qid}".encode()).digest()[:8], "big")


def _retrieve(spec: Any, queries: Any) -> dict[str, list[str]]:
    """Per qid, the retrieved doc ids in rank order (a chunked index counts each document once)."""
    from flows.cache import StepCache
    from flows.executors import make_executor
    from flows.store import default_cache_dir

    result = make_executor("local", cache=StepCache(default_cache_dir()), keep_history=False).run(spec.build(), queries)
    table = result.table
    ids = "doc_id" if "doc_id" in table.column_names else "docno"
    if "rank" in table.column_names:
        table = table.sort_by([("qid", "ascending"), ("rank", "ascending")])
    ranked: dict[str, dict[str, None]] = {}  # an insertion-ordered set per query
    for qid, doc in zip(table.column("qid").to_pylist(), table.column(ids).to_pylist()):
        if doc is not None:
            ranked.setdefault(str(qid), {})[str(doc)] = None
    return {qid: list(docs) for qid, docs in ranked.items()}

