"""Fusion of several rankings of the same queries, over the rows of a fan-in union.

A fan-in step (``inputs: [bm25, dense]``) receives the union of its branches' rows.
Each branch's rows carry that branch's own ranking in ``rank_<step>``/``score_<step>``
(written by ``operators.tables.set_ranking``), so a row belongs to branch ``b`` when
its ``rank_<b>`` is set. A document found by several branches appears once per
branch; fusion returns it once, with the fused score, its doc columns taken from one
of its rows, and every branch's ``score_<b>``/``rank_<b>`` filled in.

Why this is numpy and not ``ranx.fuse`` at run time. ranx is the reference (the
tests check parity with ``ranx.fuse`` on generic inputs), but it does not fit here:

* ``ranx.normalization.min_max_norm`` and ``sum_norm`` map a list whose scores are
  all equal (a single hit, a flat list) to 0 for every document (checked with ranx
  0.3.21: ``{"a": 1.0, "b": 1.0}`` -> ``{"a": 0.0, "b": 0.0}``), the bug Haystack and
  Open WebUI shipped; ``max_norm`` divides by 1e-9 when the best score is <= 0
  (inner-product scores can be negative), giving scores of about -1e9.
* ``ranx.fuse`` asserts that every run has the same query ids, and ``ranx.Run``
  cannot hold an empty ranking, so a query that one branch found nothing for (BM25
  with no matching word) fails the whole batch.
* ranx has no weighted RRF, and ranks tied scores in an order that depends on the
  order of insertion, so fused ranks would change with the order of the input rows.
* Its numba kernels compile on first use, on a fresh install and again in every new
  process (every Ray actor): a cost larger than the fusion itself (docs/results.md).

The maths is a few lines per method; the functions below are pure and vectorised
per (query, branch). The table side works on all queries at once (a document is a
(query, docno) pair); only a branch's scorer runs per (query, branch) list, since a
normalisation is per list.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Callable, ClassVar, Literal, Sequence

import numpy as np
import pyarrow as pa
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.errors import OperatorError, ParamsError, close_names, did_you_mean
from operators.tables import empty_like, qid_group_order, ranking_columns, set_columns, set_ranking

Normalisation = Literal["min-max", "max", "sum", "z-score"]


# -- per-branch transforms (pure) ---------------------------------------------------


def reciprocal_rank(positions: np.ndarray, k: float) -> np.ndarray:
    """RRF's per-branch score, ``1 / (k + rank)`` (Cormack, Clarke & Buettcher, SIGIR 2009)."""
    return 1.0 / (k + positions.astype(np.float64))


def normalise(scores: np.ndarray, method: Normalisation) -> np.ndarray:
    """Normalise one branch's scores for one query.

    * ``min-max``: ``(s - min) / (max - min)``; all scores equal -> 1.0 each.
    * ``max``: ``s / max(s)``; when no score is positive (inner products can all be
      negative) there is nothing to scale by, so it falls back to ``min-max`` and the
      best document still gets 1.0.
    * ``sum``: ``(s - min) / sum(s - min)`` (ranx's ``sum``); all equal -> ``1 / n`` each.
    * ``z-score``: ``(s - mean) / std``; all equal -> 0.0 each (they are all the mean).

    The degenerate cases are the point: a flat list must not come out as all zeros.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return scores
    if method == "min-max":
        low, span = scores.min(), np.ptp(scores)
        return (scores - low) / span if span > 0 else np.ones_like(scores)
    if method == "max":
        top = scores.max()
        return scores / top if top > 0 else normalise(scores, "min-max")
    if method == "sum":
        shifted = scores - scores.min()
        total = shifted.sum()
        return shifted / total if total > 0 else np.full_like(scores, 1.0 / scores.size)
    if method == "z-score":
        std = scores.std()
        return (scores - scores.mean()) / std if std > 0 else np.zeros_like(scores)
    raise ValueError(f"unknown normalisation {method!r}")


# -- the operator side ------------------------------------------------------------------


@dataclass(frozen=True)
class Branch:
    """One input ranking: its step id, its weight."""

    step: str
    weight: float = 1.0

    @property
    def rank_column(self) -> str:
        return f"rank_{self.step}"

    @property
    def score_column(self) -> str:
        return f"score_{self.step}"


def resolve_branches(explicit: Sequence[str] | None, input_steps: Sequence[str],
                     weights: dict[str, float] | None, *, op: str, step: str) -> list[Branch]:
    """The branches to fuse: ``params.branches`` if given, else the fan-in's input steps."""
    names = list(explicit or input_steps)
    if not names:
        raise OperatorError("no branches to fuse: use this step as a fan-in (inputs: [a, b]) or set "
                            "params.branches to the step ids whose rank_<step> columns to fuse",
                            op=op, step=step, field="params.branches")
    weights = dict(weights or {})
    if problem := unknown_branches(weights, names):
        raise OperatorError(problem, op=op, step=step, field="params.weights")
    return [Branch(name, float(weights.get(name, 1.0))) for name in names]


def unknown_branches(weights: dict[str, float], names: list[str]) -> str | None:
    """Why ``weights`` name steps that are not branches, with the branches each is close to (a misspelt ``dnse``);
    None when every weight is a branch's."""
    unknown = sorted(set(weights) - set(names))
    if not unknown:
        return None
    hint = did_you_mean(dict.fromkeys(close for name in unknown for close in close_names(name, names)))
    return f"weights name {unknown}, which are not branches of this step{hint and '; ' + hint} (branches: {names})"


BranchScorer = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(1-based positions, raw scores) of one branch's deduplicated list -> its per-document contributions."""


def fuse_table(table: pa.Table, branches: list[Branch], scorer: BranchScorer, *, step: str, op: str,
               needs_scores: bool) -> pa.Table:
    """One row per (qid, docno) with the fused score, ranked with ``set_ranking``."""
    columns = [b.rank_column for b in branches] + ([b.score_column for b in branches] if needs_scores else [])
    missing = [c for c in dict.fromkeys(columns) if c not in table.column_names]
    # A branch that found nothing may have left no columns; rows no branch claims are an error below.
    if table.num_rows and not any(b.rank_column in table.column_names for b in branches):
        raise OperatorError(
            f"column(s) {missing} not found: each branch's rows must carry its rank_<step>/score_<step> "
            f"(branches: {[b.step for b in branches]}); if a branch ends in a step that does not rank, set "
            f"params.branches to the ranking steps; input has {table.column_names}",
            op=op, step=step, field="params.branches")
    if table.num_rows == 0:
        out = empty_like(table)
        return set_ranking(out, pa.array([], pa.float64()), step)
    if needs_scores:
        _check_scores(table, branches, step=step, op=op)
    return _fuse(table, branches, scorer, step=step, op=op)


def _check_scores(table: pa.Table, branches: list[Branch], *, step: str, op: str) -> None:
    """A score fusion reads each ranking branch's scores: one without its score column, or with an infinite score
    (which normalises to NaN), would be fused wrongly without a word, so it is refused naming the column."""
    for branch in branches:
        if branch.rank_column not in table.column_names:
            continue  # a branch that found nothing
        if branch.score_column not in table.column_names:
            raise OperatorError(f"branch '{branch.step}' has {branch.rank_column} but no {branch.score_column}: a "
                                "score fusion needs each branch's scores (fuse.rrf reads ranks alone)",
                                op=op, step=step, field="params.branches")
        scores = _floats(table, branch.score_column)
        infinite = np.flatnonzero(np.isinf(scores))
        if infinite.size:
            qid = table.column("qid")[int(infinite[0])].as_py()
            raise OperatorError(f"{branch.score_column} of query {qid!r} holds {scores[infinite[0]]}: a score "
                                "fusion needs finite scores (fuse.rrf reads ranks alone)",
                                op=op, step=step, field="params.branches")


def _fuse(table: pa.Table, branches: list[Branch], scorer: BranchScorer, *, step: str, op: str) -> pa.Table:
    """Every query at once: documents are (query, docno) pairs; only the per-branch scorer runs
    per (query, branch), on that query's deduplicated list of the branch."""
    queries = qid_group_order(table)  # each row's query, numbered in order of first appearance
    docno_column = table.column("docno")
    if docno_column.null_count:
        first = int(queries[np.flatnonzero(docno_column.is_null().to_numpy(zero_copy_only=False))].min())
        qid = table.column("qid")[int(np.flatnonzero(queries == first)[0])].as_py()
        raise OperatorError(f"query {qid!r} has rows without a docno", op=op, step=step, field="docno")
    docnos = np.asarray(docno_column.to_numpy(zero_copy_only=False), dtype=str)
    _, doc_codes = np.unique(docnos, return_inverse=True)
    n_docs = int(doc_codes.max()) + 1
    # One number per (query, document), in query order then docno order.
    pair_keys, pair_of_row = np.unique(queries * n_docs + doc_codes, return_inverse=True)
    n_pairs = len(pair_keys)
    fused = np.zeros(n_pairs)
    # For each branch, the row that represents each (query, document) in it (-1: not in the branch).
    best_rows = np.full((len(branches), n_pairs), -1, dtype=np.int64)
    for i, branch in enumerate(branches):
        ranks = _floats(table, branch.rank_column)
        scores = _floats(table, branch.score_column)
        member = np.flatnonzero(~np.isnan(ranks))
        if member.size == 0:
            continue
        # Per query, best first: rank, then higher score, then docno; the first row of each
        # document wins (the same document twice in one branch counts once, at its best position).
        order = member[np.lexsort((docnos[member], -np.nan_to_num(scores[member], nan=-np.inf), ranks[member],
                                   queries[member]))]
        _, first = np.unique(pair_of_row[order], return_index=True)
        kept = order[np.sort(first)]
        starts = np.flatnonzero(np.diff(queries[kept], prepend=-1))
        ends = np.append(starts[1:], len(kept))
        positions = np.arange(1, len(kept) + 1) - np.repeat(starts, ends - starts)
        contribution = np.concatenate([scorer(positions[a:b], scores[kept[a:b]]) for a, b in zip(starts, ends)])
        fused[pair_of_row[kept]] += branch.weight * contribution
        best_rows[i, pair_of_row[kept]] = kept
    found = (best_rows >= 0).any(axis=0)
    if not found.all():
        first_lost = int(np.flatnonzero(~found)[0])
        query_of_pair = pair_keys // n_docs
        lost_pairs = np.flatnonzero(~found & (query_of_pair == query_of_pair[first_lost]))
        row_of_pair = np.empty(n_pairs, dtype=np.int64)
        row_of_pair[pair_of_row] = np.arange(len(pair_of_row))
        lost = docnos[row_of_pair[lost_pairs[:5]]].tolist()
        qid = table.column("qid")[int(row_of_pair[first_lost])].as_py()
        absent = [b.rank_column for b in branches if b.rank_column not in table.column_names]
        raise OperatorError(
            f"query {qid!r}: rows for {lost} carry none of the branch columns "
            f"{[b.rank_column for b in branches]}" + (f" ({absent} not in the input)" if absent else "")
            + "; set params.branches to the steps that ranked them",
            op=op, step=step, field="params.branches")
    # The representative row of a document: its row in the first branch that has it.
    first_branch = np.argmax(best_rows >= 0, axis=0)
    representative = best_rows[first_branch, np.arange(n_pairs)]
    counted = (best_rows[[b.weight > 0 for b in branches]] >= 0).any(axis=0)
    if not counted.all():  # weight 0 leaves a branch out: the documents only it found too, not tied at 0 below
        best_rows, representative, fused = best_rows[:, counted], representative[counted], fused[counted]
    own: dict[str, pa.Array] = {}
    for i, branch in enumerate(branches):  # every branch's own ranking stays visible on the fused row
        for column in (branch.rank_column, branch.score_column):
            if column in table.column_names:
                source = best_rows[i]
                values = table.column(column).take(np.where(source >= 0, source, 0))
                own[column] = _null_where(values, pa.array(source < 0))
    rows = set_columns(table.take(representative), own)
    return set_ranking(rows, pa.array(fused, pa.float64()), step, groups=queries[representative])


def _floats(group: pa.Table, column: str) -> np.ndarray:
    if column not in group.column_names:
        return np.full(group.num_rows, np.nan)
    return group.column(column).cast(pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64)


def _null_where(values: pa.ChunkedArray, mask: pa.Array) -> pa.Array:
    import pyarrow.compute as pc

    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    return pc.if_else(mask, pa.nulls(len(values), values.type), values)


# -- what the fusion operators share ------------------------------------------------


def _not_negative(weight: float) -> float:
    if weight < 0:  # (a NaN is refused, as in every param, by operators.params)
        raise ValueError(f"a weight is 0 or more (0 leaves the branch out), not {weight}: a negative one turns "
                         "the branch's ranking upside down")
    return weight


class FusionParams(BaseModel):
    """Params every fusion operator takes: which branches, and their weights."""

    model_config = ConfigDict(extra="forbid")
    weights: dict[str, Annotated[float, AfterValidator(_not_negative)]] | None = Field(
        None, description="Weight per branch step id (default 1.0 each; 0 leaves a branch out, a negative weight "
        "would turn its ranking upside down), e.g. {bm25: 0.3, dense: 0.7}.")
    branches: list[str] | None = Field(
        None, min_length=1, description="Step ids whose score_<step>/rank_<step> columns hold the rankings "
        "to fuse; default: this step's inputs. Set it when a branch ends in a step that does not rank.")


class Fuser(Operator):
    """Base of the fusion operators (not registered: it has no name); subclasses give ``branch_scores``."""

    scope = "query"
    Params: ClassVar[type[BaseModel]] = FusionParams
    #: Whether ``branch_scores`` reads the branches' scores (or only their ranks).
    needs_scores: ClassVar[bool] = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        weights, names = self.params.weights or {}, self.branch_steps()
        # known here, from the params and inputs: refused when the flow is built, not after it ran
        if names and (problem := unknown_branches(weights, names)):
            raise ParamsError(problem, op=self.name, step=self.step_id, field="params.weights")
        if names and not any(weights.get(name, 1.0) > 0 for name in names):
            raise ParamsError(f"every branch's weight is 0 (branches: {names}): nothing would be fused",
                              op=self.name, step=self.step_id, field="params.weights")

    def branch_steps(self) -> list[str]:
        """The step ids whose rankings this step fuses: ``params.branches``, else its inputs (flows.spec_checks
        checks them against the flow when it is built)."""
        return list(self.params.branches or self.input_steps)

    def reads(self) -> list[str]:
        return ["qid", "docno"]

    def produces(self) -> dict[str, str]:
        return ranking_columns(self.step_id)

    def cache_identity(self) -> dict[str, Any]:
        identity = super().cache_identity()
        identity["branches"] = self.branch_steps()
        return identity

    def branch_scores(self, positions: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """One branch's contribution for one query, before its weight (positions are 1-based ranks)."""
        raise NotImplementedError

    def transform(self, table: pa.Table) -> pa.Table:
        branches = resolve_branches(self.params.branches, self.input_steps, self.params.weights,
                                    op=self.name, step=self.step_id)
        return fuse_table(table, branches, self.branch_scores, step=self.step_id, op=self.name,
                          needs_scores=self.needs_scores)
