"""Multi-hop retrieval over an index built by ``tessera ingest`` (STIndex's multi-hop retriever)."""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, field_validator

from operators.base import Operator
from operators.llm.aliases import key_env, known_model, missing_file, model_identity
from operators.local_files import llm_model
from operators.fuse._fusion import Branch, fuse_table, reciprocal_rank
from operators.retrieve.bm25 import BM25Retriever
from operators.retrieve.dense import DenseRetriever
from operators.retrieve.multi_hop_follow_ups import FOLLOW_UPS, FollowUps, mentioned
from operators.retrieve.multi_hop_links import title_links
from operators.tables import concat, query_rows, ranking_columns, set_columns, set_ranking

#: The column that holds a row's cosine to the question, where the question's dense search found it.
QUESTION_COSINE = "score_dense"
#: Columns that carry a hop query back to the question it was written for.
_QUESTION, _SLOT, _SEED_TEXT, _SEED = ("__multi_hop_question", "__multi_hop_slot", "__multi_hop_seed_text",
                                       "__multi_hop_seed")


class MultiHopRetriever(FollowUps, Operator):
    """Retrieve in hops: the documents one hop finds write the queries of the next.

    Hop 1 retrieves for the question. Its top ``documents_per_hop`` documents each
    write one follow-up query (``follow_up: titles``: the document's title; ``texts``:
    its title and text; ``mentions``: its title and text, of whose results only the
    documents whose titles the seed's text mentions are kept, the links it makes;
    after the question when ``with_question``; ``links``: no query is searched, the
    documents whose titles its text names are looked up in the index's titles,
    ``multi_hop_links``, and ranked by the question's own search), and each follow-up
    query retrieves ``follow_up_k`` documents in hop 2, whose best new documents seed hop 3, and so on
    up to ``max_hops``. Every query is searched by ``retriever`` (``retrieve.bm25``,
    ``retrieve.dense``, or both fused by RRF: ``hybrid``) over the step's ``index``.
    The final ranking fuses every query's ranking by RRF (``1 / (rrf_k + rank)``; the
    question's ranking weighs 1, a follow-up's ``follow_up_weight`` times its seed's
    reciprocal rank against the best seed's), so what the best seeds lead to comes
    first and a document several queries agree on rises; the top ``k`` are kept. Each row says the
    ``hop`` that first found it. With ``dedup`` a later hop's rankings hold only
    documents no earlier hop found, so a bridge document is not counted twice and the
    next hop is seeded by new documents; a document never seeds twice either way. With
    ``question_links`` hop 1 also ranks the documents whose titles the question names
    (not a seed: seeds come from the question's search). A row the question's own dense search found keeps its
    cosine to the question as ``score_dense``, as ``fuse.rrf`` keeps a dense step's (``generate.answer``'s
    ``min_relevance`` reads it); the others have none.

    A follow-up mode is one method, ``_follow_up_<mode>(seeds, questions)`` (``multi_hop_follow_ups``): one query
    per seed row (``qid, docno, title, text`` of a seed document, ``questions[i]`` the
    question it was found for). A model-written mode (``llm``: "what to search next")
    is that method calling the LLM gateway (``operators/llm``), plus its name in
    ``follow_up``.

    Usage::

        MultiHopRetriever({"index": "hotpotqa", "k": 10, "max_hops": 2})(
            pa.table({"qid": ["1"], "query": ["Which state is the birthplace of the author of Walden in?"]}))
    """

    name = "retrieve.multi_hop"
    version = "3"  # 2: title links match leftmost-longest; 3: score_dense
    aliases = ("multi_hop",)
    scope = "query"

    def index_needs(self) -> tuple[str, ...]:
        """What an index built for this step must hold: its retriever's."""
        return ("bm25", "dense") if self.params.retriever == "hybrid" else (self.params.retriever,)

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        index: str | None = Field(None, description="Name (under $TESSERA_HOME/indices) or path of an index built "
                                  "by tessera ingest; the benchmarker fills it in for built-in flows.")
        retriever: Literal["bm25", "dense", "hybrid"] = Field(
            "hybrid", description="How every hop's queries are searched: retrieve.bm25, retrieve.dense, or both "
            "fused by RRF (hybrid; the index needs BM25 statistics and vectors).")
        k: int = Field(100, gt=0, le=10_000, description="Results per question after the hops are merged; the "
                       "question's own search retrieves this many too.")
        max_hops: int = Field(2, ge=1, le=5, description="Hops, the question's search included (1: no follow-up).")
        documents_per_hop: int = Field(5, ge=1, le=100, description="Documents of a hop (best first, each used "
                                       "once) that write the next hop's queries, one query each.")
        follow_up_k: int = Field(20, gt=0, le=10_000, description="Results each follow-up query retrieves.")
        follow_up: Literal["titles", "texts", "mentions", "links", "llm"] = Field(
            "titles", description="How a seed document becomes a follow-up query: titles (its title; its text's "
            "first words when it has none), texts (its title and text), mentions (its title and text, and of "
            "what that finds only the documents whose title its text mentions: the links a seed's text makes), "
            "links (no search: the documents whose titles its text names, looked up in the index's titles and "
            "ranked by the question's own ranking), or llm (follow_up_model writes the query from the question "
            "and the seed; its title where the call fails).")
        question_links: bool = Field(False, description="Hop 1 also ranks the documents whose titles the question "
                                     "names (as follow_up: links finds them), beside the question's search, "
                                     "weighing 1: the second entity of a comparison question.")
        follow_up_model: str = Field("local", min_length=1, json_schema_extra=llm_model(), description="With "
                                     "follow_up: llm, the model (an alias or a litellm string) that writes the "
                                     "follow-up queries, at temperature 0.")
        follow_up_timeout: float | None = Field(None, gt=0, description="With follow_up: llm, the seconds one "
                                                "call may take (per attempt); null takes the alias's setting.")
        follow_up_retries: int | None = Field(None, ge=0, description="With follow_up: llm, litellm's retries "
                                              "after a timeout, a rate limit or a server error; null takes the "
                                              "alias's setting.")
        with_question: bool = Field(False, description="Put the question before each follow-up query.")
        dedup: bool = Field(True, description="A later hop's rankings keep only documents that no earlier hop "
                            "found (so they are neither counted twice nor seed again).")
        follow_up_weight: float = Field(1.0, ge=0, description="RRF weight of the ranking of the follow-up query "
                                        "written by a hop's best seed (the question's ranking weighs 1); the n-th "
                                        "seed's weighs (rrf_k + 1) / (rrf_k + n) times as much.")
        rrf_k: float = Field(60.0, ge=0, description="RRF's rank constant for merging the hops' rankings.")

        _a_known_model = field_validator("follow_up_model")(known_model)  # as on the language-model steps

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        p = self.params
        kinds = self.index_needs()
        classes = {"bm25": BM25Retriever, "dense": DenseRetriever}
        # The question's search and the follow-ups' differ only in depth; both share the process's open index.
        self._retrievers, self._follow_up_retrievers = (
            [classes[kind]({"index": p.index, "k": k}, step_id=f"{self.step_id}_{kind}") for kind in kinds]
            for k in (p.k, p.follow_up_k))

    def reads(self) -> list[str]:
        return ["qid", "query"]

    def metadata_keys(self) -> frozenset[str]:
        return frozenset({FOLLOW_UPS}) if self.params.follow_up == "llm" else frozenset()

    def produces(self) -> dict[str, str]:
        dense = {QUESTION_COSINE: "data"} if "dense" in self.index_needs() else {}
        return {"docno": "id", "doc_id": "id", "title": "data", "text": "text", "hop": "data",
                **ranking_columns(self.step_id), **dense}

    def calls_model(self) -> bool:
        return self.params.follow_up == "llm"

    def required_models(self) -> dict[str, str]:
        """Its retrievers' models, and the .gguf ``follow_up_model`` names when it is not there (``follow_up: llm``),
        so the flow is refused before it runs, as a language-model step is."""
        found = {where: ref for op in self._retrievers for where, ref in op.required_models().items()}
        if self.params.follow_up == "llm" and (missing := missing_file(self.params.follow_up_model)):
            found["params.follow_up_model"] = missing
        return found

    def required_env(self) -> dict[str, str]:
        """The key variable of ``follow_up_model``'s alias, only when ``follow_up: llm`` calls it."""
        found = super().required_env()
        if self.params.follow_up == "llm" and (variable := key_env(self.params.follow_up_model)):
            found["params.follow_up_model"] = variable
        return found

    def cache_identity(self) -> dict[str, Any]:
        identity = super().cache_identity()
        identity["index"] = self._retrievers[0].index_identity()
        weights = [w for r in self._retrievers + self._follow_up_retrievers if (w := getattr(r, "encoder_weights",
                                                                                          lambda: None)())]
        if weights:  # a dense search's encoder, retrained under its name, ranks otherwise
            identity["weights"] = sorted(set(weights))
        if self.params.follow_up == "llm":  # what the alias names now, as the language-model steps key on it
            identity["follow_up_model"] = model_identity(self.params.follow_up_model)
        return identity

    def setup(self) -> None:
        for op in self._retrievers + self._follow_up_retrievers:
            op.ensure_setup()

    # -- one search: every query of a hop at once -----------------------------------

    def _search(self, queries: pa.Table, retrievers: list, k: int, cosine: bool = False) -> pa.Table:
        """Each query's top ``k`` by ``retrievers`` (fused as the ``hybrid`` flow fuses them: RRF, k = 60);
        ``rank`` is that query's own ranking; ``cosine``: the dense retriever's score kept as ``score_dense``."""
        found = [op(queries) for op in retrievers]
        if len(found) == 1:
            rows = found[0]
        else:
            rows = fuse_table(concat(found), [Branch(op.step_id) for op in retrievers], _rrf(60.0),
                              step=f"{self.step_id}_hybrid", op=self.name, needs_scores=False)
        rows = rows.filter(pc.less_equal(rows.column("rank"), k))
        dense = [op for op in retrievers if isinstance(op, DenseRetriever)]
        kept = {QUESTION_COSINE: rows.column(f"score_{dense[0].step_id}")} if cosine and dense else {}
        own = [c for c in rows.column_names if c.startswith(("score_", "rank_"))]
        return set_columns(rows.drop_columns(own), kept)

    # -- follow-up queries (each mode's method: ``multi_hop_follow_ups``) -------------

    def _follow_ups(self, seeds: pa.Table, questions: list[str]) -> list[str]:
        """One query per seed row, by the ``follow_up`` mode's method; ``questions`` are every question asked."""
        asked = [questions[i] for i in seeds.column(_QUESTION).to_pylist()]
        queries = getattr(self, f"_follow_up_{self.params.follow_up}")(seeds, asked)
        if not self.params.with_question:
            return queries
        return [f"{q} {f}" for q, f in zip(asked, queries)]

    # -- the hops -------------------------------------------------------------------

    def transform(self, table: pa.Table) -> pa.Table:
        p = self.params
        questions = query_rows(table)
        qids = questions.column("qid").cast(pa.string())
        texts = [q or "" for q in questions.column("query").to_pylist()]
        n = questions.num_rows
        hop_queries = pa.table({"qid": qids, "query": pa.array(texts, pa.string()),
                                _QUESTION: pa.array(np.arange(n), pa.int64()),
                                _SLOT: pa.array(np.zeros(n), pa.int64())})
        branches, parts = [], []
        seen = seeded = pa.array([], pa.string())  # "<question number>\x1f<docno>" of documents found / seeding
        for hop in range(1, p.max_hops + 1):
            slots = 1 + p.question_links if hop == 1 else p.documents_per_hop
            hop_branches = [Branch(f"{self.step_id}_h{hop}_{j}", 1.0 if hop == 1 else self._follow_up_weight(j))
                            for j in range(slots)]
            branches += hop_branches
            if hop == 1:
                rows = self._search(hop_queries, self._retrievers, p.k, cosine=True)
                ranked = dict(zip(_keys(rows).to_pylist(), rows.column("rank").to_pylist()))
                if p.question_links:  # the question's links: slot 1 of hop 1
                    named = set_columns(hop_queries, {_SLOT: pa.array(np.ones(n, np.int64))})
                    rows = concat([rows, self._linked(named, ranked)])
            elif p.follow_up == "links":
                rows = self._linked(hop_queries, ranked)
            else:
                rows = self._search(hop_queries, self._follow_up_retrievers, p.follow_up_k)
            if hop > 1 and p.follow_up == "mentions":
                rows = rows.filter(pa.array(mentioned(rows.column("title").to_pylist(),
                                                       rows.column(_SEED_TEXT).to_pylist()), pa.bool_()))
            keys = _keys(rows)
            if hop > 1 and p.dedup:
                fresh = pc.invert(pc.is_in(keys, value_set=seen))
                rows, keys = rows.filter(fresh), keys.filter(fresh)
            rows = self._as_branches(rows, hop, slots, qids)
            parts.append(rows)
            seen = pa.concat_arrays([seen, pc.unique(keys)])
            if hop == p.max_hops:
                break
            if hop == 1:  # seeds come from the question's search alone
                hop_branches = hop_branches[:1]
                rows = rows.filter(pc.is_valid(rows.column(hop_branches[0].rank_column)))
            seeds = self._seeds(rows, hop_branches, seeded)
            if seeds.num_rows == 0:
                break
            seeded = pa.concat_arrays([seeded, _keys(seeds)])
            slot = pc.subtract(seeds.column("rank").cast(pa.int64()), 1)
            hop_queries = pa.table({
                "qid": pc.binary_join_element_wise(seeds.column("qid"), pc.cast(slot, pa.string()), f"\x1fh{hop + 1}."),
                "query": pa.array(self._follow_ups(seeds, texts), pa.string()),
                _QUESTION: seeds.column(_QUESTION), _SLOT: slot, _SEED_TEXT: seeds.column("text"),
                _SEED: seeds.column("docno")})
        fused = fuse_table(concat(parts), branches, _rrf(p.rrf_k), step=self.step_id, op=self.name,
                           needs_scores=False)
        fused = fused.filter(pc.less_equal(fused.column("rank"), p.k))
        return self._with_question_columns(fused, questions)

    def _linked(self, queries: pa.Table, ranked: dict[str, int]) -> pa.Table:
        """Per query row, the documents whose titles its query names (its seed aside), a ranking found without a
        search: by the question's own search (``ranked``: key -> rank), the ones it missed after in order of mention."""
        index = self._retrievers[0].index
        links = title_links(index)
        seeds = queries.column(_SEED).to_pylist() if _SEED in queries.column_names else [None] * queries.num_rows
        picked, docnos, ranks = [], [], []
        for i, (text, question, seed) in enumerate(zip(queries.column("query").to_pylist(),
                                                       queries.column(_QUESTION).to_pylist(), seeds)):
            found = sorted((d for d in links.find(text) if d != seed),
                           key=lambda d: ranked.get(f"{question}\x1f{d}", math.inf))
            picked += [i] * len(found)
            docnos += found
            ranks += range(1, len(found) + 1)
        asked = queries.take(pa.array(picked, pa.int64()))
        return set_columns(index.documents(docnos), {**dict(zip(asked.column_names, asked.columns)),
                                                     "rank": pa.array(ranks, pa.int32())})

    def _follow_up_weight(self, slot: int) -> float:
        """The RRF weight of the follow-up query written by a hop's ``slot + 1``-th best seed: ``follow_up_weight``
        times that seed's reciprocal rank against the best seed's, so the best seed's follow-ups count most."""
        p = self.params
        return p.follow_up_weight * (p.rrf_k + 1) / (p.rrf_k + slot + 1)

    def _as_branches(self, rows: pa.Table, hop: int, slots: int, qids: pa.ChunkedArray) -> pa.Table:
        """Rows under their question's qid, each hop query's ranking in its own ``rank_<step>_h<hop>_<slot>``
        (fusion counts positions, so the gaps dedup left in a ranking do not matter)."""
        ranks = rows.column("rank").cast(pa.float64())
        slot = rows.column(_SLOT).to_numpy(zero_copy_only=False)
        columns = {f"rank_{self.step_id}_h{hop}_{j}": pc.if_else(pa.array(slot == j), ranks,
                                                                 pa.scalar(None, pa.float64()))
                   for j in range(slots)}
        columns["hop"] = pa.array(np.full(rows.num_rows, hop, np.int32))
        columns["qid"] = qids.take(rows.column(_QUESTION))
        return set_columns(rows, columns)

    def _seeds(self, rows: pa.Table, hop_branches: list[Branch], seeded: pa.Array) -> pa.Table:
        """Per question, the hop's best ``documents_per_hop`` documents (its queries' rankings fused) that have
        not seeded a query yet, ranked 1.. in ``rank``."""
        fused = fuse_table(rows, hop_branches, _rrf(self.params.rrf_k), step=f"{self.step_id}_seeds", op=self.name,
                           needs_scores=False)
        fused = fused.filter(pc.invert(pc.is_in(_keys(fused), value_set=seeded)))
        fused = set_ranking(fused, pc.negate(fused.column("rank").cast(pa.float64())), f"{self.step_id}_seeds")
        return fused.filter(pc.less_equal(fused.column("rank"), self.params.documents_per_hop))

    def _with_question_columns(self, fused: pa.Table, questions: pa.Table) -> pa.Table:
        """Drop the per-query ranking columns; put each question's own columns (qid, query, extras) on its rows,
        the questions in their input order (a fusion lists first the questions its first ranking found: those BM25
        found nothing for came last, and a cached run, which keeps the input's order, was ordered otherwise)."""
        fused = fused.take(np.argsort(fused.column(_QUESTION).to_numpy(), kind="stable"))
        which = fused.column(_QUESTION)
        internal = [c for c in fused.column_names if c in (_QUESTION, _SLOT, _SEED_TEXT, _SEED)
                    or c.startswith((f"rank_{self.step_id}_", f"score_{self.step_id}_"))]
        fused = fused.drop_columns(internal)
        extra = [c for c in questions.column_names if c not in fused.column_names or c in ("qid", "query")]
        return set_columns(fused, dict(zip(extra, questions.select(extra).take(which).columns)))


def _rrf(k: float):
    """``fuse_table``'s per-branch scorer for reciprocal rank fusion with rank constant ``k``."""
    return lambda positions, _scores: reciprocal_rank(positions, k)


def _keys(rows: pa.Table) -> pa.Array:
    """``<question number>\x1f<docno>`` per row: a document found for a question."""
    keys = pc.binary_join_element_wise(rows.column(_QUESTION).cast(pa.string()), rows.column("docno"), "\x1f")
    return keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys
