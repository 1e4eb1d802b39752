"""retrieve.multi_hop: the contract, one hop is plain retrieval, later hops come from the seeds' titles, errors,
and a real multi-hop set."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from operators.errors import OperatorError, ParamsError
from operators.registry import create
from operators.testing import OperatorContract
from operators.testing import sample_queries as queries

# Its hops search the ingested sample index (BM25 and MiniLM): make test runs it, make test-fast leaves it out.
pytestmark = pytest.mark.integration


def multi_hop(index, **params):
    return create("retrieve.multi_hop", {"index": str(index), "retriever": "bm25", "k": 10, **params},
                  step_id="hops")


def rows_of(table: pa.Table, qid: str) -> list[dict]:
    return table.filter(pc.equal(table.column("qid"), qid)).to_pylist()


class TestMultiHopContract(OperatorContract):
    operator_name = "retrieve.multi_hop"

    @pytest.fixture(autouse=True)
    def _index(self, sample_index):
        self.index = sample_index

    def make_operator(self, **params):
        return multi_hop(self.index, k=6, documents_per_hop=2, follow_up_k=4, **params)

    def make_input(self, n_queries: int = 3, per_query: int = 5) -> pa.Table:
        return queries(n_queries)


def test_one_hop_is_the_retrievers_own_ranking(sample_index):
    first = create("retrieve.bm25", {"index": str(sample_index), "k": 10}, step_id="bm25")(queries(3))
    out = multi_hop(sample_index, max_hops=1)(queries(3))
    assert out.column("docno").to_pylist() == first.column("docno").to_pylist()
    assert set(out.column("hop").to_pylist()) == {1}


@pytest.mark.parametrize("with_question", [False, True])
def test_later_hops_search_the_titles_of_the_first_hops_best_documents(sample_index, with_question):
    k, seeds_per_hop, follow_up_k = 10, 3, 5
    out = multi_hop(sample_index, k=k, documents_per_hop=seeds_per_hop, follow_up_k=follow_up_k,
                    with_question=with_question)(queries(3))
    bm25 = create("retrieve.bm25", {"index": str(sample_index), "k": k}, step_id="bm25")
    first = bm25(queries(3))
    assert set(out.column("hop").to_pylist()) == {1, 2}
    for qid, question in zip(*queries(3).to_pydict().values()):
        found = rows_of(first, qid)
        titles = [r["title"] for r in found[:seeds_per_hop]]
        follow_ups = pa.table({"qid": [f"f{i}" for i in range(len(titles))],
                               "query": [f"{question} {t}" if with_question else t for t in titles]})
        reachable = set(create("retrieve.bm25", {"index": str(sample_index), "k": follow_up_k},
                               step_id="f")(follow_ups).column("docno").to_pylist())
        rows = rows_of(out, qid)
        assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
        assert len({r["docno"] for r in rows}) == len(rows), "a document appears once per question"
        assert all(r["query"] == question for r in rows)
        first_hop = {r["docno"] for r in found}
        later = {r["docno"] for r in rows if r["hop"] == 2}
        assert later <= reachable - first_hop  # new documents, found by a seed's title
        assert {r["docno"] for r in rows if r["hop"] == 1} <= first_hop


def test_mentions_keep_only_the_documents_whose_title_the_seed_mentions(sample_index):
    out = multi_hop(sample_index, follow_up="mentions", documents_per_hop=3, follow_up_k=30)(queries(3))
    first = create("retrieve.bm25", {"index": str(sample_index), "k": 10}, step_id="bm25")(queries(3))
    assert 2 in out.column("hop").to_pylist(), "no seed mentioned any document the follow-ups found"
    for qid in ("q1", "q2", "q3"):
        seeds = rows_of(first, qid)[:3]
        for row in (r for r in rows_of(out, qid) if r["hop"] == 2):
            name = row["title"].split(" (")[0].lower()
            assert any(name in (s["text"] or "").lower() for s in seeds), row["title"]


def test_without_dedup_a_later_hop_adds_weight_to_documents_found_before(sample_index):
    deduped = multi_hop(sample_index, documents_per_hop=3, follow_up_k=5)(queries(1))
    counted_twice = multi_hop(sample_index, documents_per_hop=3, follow_up_k=5, dedup=False)(queries(1))
    assert deduped.column("score").to_pylist() != counted_twice.column("score").to_pylist()
    assert max(counted_twice.column("score").to_pylist()) > max(deduped.column("score").to_pylist())


def test_hybrid_hops_fuse_bm25_and_dense(sample_index):
    out = multi_hop(sample_index, retriever="hybrid", documents_per_hop=2, follow_up_k=5)(queries(2))
    assert set(out.column("qid").to_pylist()) == {"q1", "q2"}
    assert set(out.column("hop").to_pylist()) == {1, 2}
    op = multi_hop(sample_index, retriever="hybrid")
    assert list(op.required_models().values()) == ["all-MiniLM-L6-v2"]


def test_the_question_searchs_cosines_are_kept_as_score_dense(sample_index):
    """What generate.answer's min_relevance reads: the dense search of the question, not of a hop's follow-up."""
    asked = queries(2)
    dense = create("retrieve.dense", {"index": str(sample_index), "k": 20}, step_id="dense")(asked)
    cosine = {(r["qid"], r["docno"]): r["score"] for r in dense.to_pylist()}
    out = multi_hop(sample_index, retriever="hybrid", k=20, follow_up="links", dedup=False)(asked).to_pylist()
    assert {r["hop"] for r in out} == {1, 2}
    for row in out:
        assert row["score_dense"] == pytest.approx(cosine.get((row["qid"], row["docno"])), nan_ok=True) \
            or (row["score_dense"] is None and (row["qid"], row["docno"]) not in cosine)
    assert any(r["score_dense"] is None for r in out) and any(r["score_dense"] is not None for r in out)
    assert "score_dense" not in multi_hop(sample_index)(asked).column_names  # bm25 alone: no cosine
    assert "score_dense" not in multi_hop(sample_index).produces()


def test_questions_come_out_in_their_input_order_whatever_bm25_found(sample_index):
    """A question BM25 finds nothing for ("x") came after the others: its fusion lists first the questions its first
    ranking holds, while a cached run keeps the input's order, so --out files differed with and without the cache."""
    asked = pa.table({"qid": ["q1", "q2", "q3"], "query": ["whale", "x", "honey bees"]})
    out = multi_hop(sample_index, retriever="hybrid", k=3)(asked)
    assert list(dict.fromkeys(out.column("qid").to_pylist())) == ["q1", "q2", "q3"]
    for qid in ("q1", "q2", "q3"):
        assert [row["rank"] for row in rows_of(out, qid)] == [1, 2, 3]


def test_bad_params_and_index_name_the_field(tmp_path):
    with pytest.raises(ParamsError) as err:
        create("retrieve.multi_hop", {"max_hops": 0})
    assert err.value.field == "params.max_hops"
    with pytest.raises(ParamsError) as err:
        create("retrieve.multi_hop", {"follow_up": "summaries"})
    assert err.value.field == "params.follow_up"
    with pytest.raises(OperatorError, match="cannot open index") as err:
        create("retrieve.multi_hop", {"index": str(tmp_path / "nothing")})(queries(1))
    assert err.value.field == "params.index"


@pytest.fixture(scope="module")
def hotpot_train100(shared_data, tmp_path_factory):
    """The HotpotQA train100 set (HippoRAG's 100 questions, 994 paragraphs) in a BM25 index, with its gold pairs."""
    from flows.queries import read_queries
    from operators.sources._beir_files import load_qrels
    from operators.store import Index, IndexSettings

    root = shared_data / "hotpotqa_train100_hipporag"
    docs = [json.loads(line) for line in (root / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    table = pa.table({"docno": [d["_id"] for d in docs], "doc_id": [d["_id"] for d in docs],
                      "title": [d.get("title", "") for d in docs], "text": [d["text"] for d in docs]})
    index = Index.create(tmp_path_factory.mktemp("hotpot") / "train100", IndexSettings(dense=False))
    index.commit([index.write_shard("a", table)])
    qrels = load_qrels(root, "test").to_pylist()
    gold: dict[str, set[str]] = {}
    for row in qrels:
        gold.setdefault(row["qid"], set()).add(row["docno"])
    return index.path, read_queries(root / "queries.jsonl"), gold


def both_gold_at(table: pa.Table, gold: dict[str, set[str]], k: int) -> float:
    top: dict[str, set[str]] = {}
    for row in table.filter(pc.less_equal(table.column("rank"), k)).select(["qid", "docno"]).to_pylist():
        top.setdefault(row["qid"], set()).add(row["docno"])
    return sum(gold[q] <= top.get(q, set()) for q in gold) / len(gold)


@pytest.mark.data
@pytest.mark.parametrize("follow_up", [
    {"follow_up": "mentions", "follow_up_k": 50},
    {"follow_up": "links", "question_links": True, "dedup": False, "rrf_k": 5, "follow_up_weight": 0.5}])
def test_a_second_hop_finds_more_gold_pairs_on_hotpotqa(hotpot_train100, follow_up):
    """On a real multi-hop set, following the links of the best documents' texts finds both gold paragraphs in
    the top 10 for more questions than the question's own BM25 search."""
    path, asked, gold = hotpot_train100
    single = create("retrieve.bm25", {"index": str(path), "k": 10}, step_id="bm25")(asked)
    hops = create("retrieve.multi_hop", {"index": str(path), "retriever": "bm25", "k": 10, "documents_per_hop": 3,
                                         **follow_up}, step_id="hops")(asked)
    assert both_gold_at(hops, gold, 10) > both_gold_at(single, gold, 10)


def test_llm_follow_ups_are_the_models_queries_and_titles_where_it_fails(sample_index, fault_models):
    fault_models.reply = "  \n- gothic cathedral architecture\nanother line"
    asked = multi_hop(sample_index, documents_per_hop=2, follow_up_k=5, follow_up="llm", follow_up_model="fault-ok")
    out = asked(queries(2))
    assert fault_models.attempts["ok"] == 4   # two seeds for each of two questions
    written_down = asked.drain_metadata()  # what it searched, said (a result the question lacked was untraceable)
    assert all(meta["follow_up_queries"] == ["gothic cathedral architecture"] * 2 for meta in written_down.values())
    prompts = [body["messages"][-1]["content"] for body in fault_models.bodies]
    for question in queries(2).column("query").to_pylist():
        assert sum(f"Question: {question}\nA document found so far" in p for p in prompts) == 2
    written = set(create("retrieve.bm25", {"index": str(sample_index), "k": 5}, step_id="f")(
        pa.table({"qid": ["f"], "query": ["gothic cathedral architecture"]})).column("docno").to_pylist())
    assert {r["docno"] for r in out.to_pylist() if r["hop"] == 2} <= written
    failing_op = multi_hop(sample_index, documents_per_hop=2, follow_up_k=5, follow_up="llm",
                           follow_up_model="fault-error")
    failing = failing_op(queries(2))
    spent = failing_op.drain_usage()  # the failed calls are counted, with their seconds, as an LLM step's are
    assert spent["llm_calls"] == spent["llm_failed"] == 4 and spent["llm_seconds"] > 0
    metadata = failing_op.drain_metadata()
    # and in each query's usage, as an LLM step counts them (the step record said llm_failed, the query nothing)
    assert all(meta["usage"]["hops"]["calls"] == meta["usage"]["hops"]["failed"] == 2 for meta in metadata.values())
    marks = {qid: meta["degraded"] for qid, meta in metadata.items()}
    assert set(marks) == set(queries(2).column("qid").to_pylist())  # every query says why, as rerankers do
    assert all(m["step"] == failing_op.step_id and m["reason"].startswith("2 follow-up queries are seed titles")
               for m in marks.values())
    assert all(len(meta["follow_up_queries"]) == 2 for meta in metadata.values())  # the seeds' titles
    titles = multi_hop(sample_index, documents_per_hop=2, follow_up_k=5)(queries(2))
    assert failing.column("docno").to_pylist() == titles.column("docno").to_pylist()


def test_a_missing_follow_up_gguf_is_declared_so_the_flow_is_refused_before_it_runs(tmp_path):
    """As a language-model step does: ``follow_up: llm`` with a .gguf that is not there is a model the pre-run check
    reports; with title links the model is never called, so nothing is declared."""
    missing = tmp_path / "nope.gguf"
    params = {"index": str(tmp_path / "idx"), "retriever": "bm25", "follow_up_model": f"tessera/{missing}"}
    asked = create("retrieve.multi_hop", {**params, "follow_up": "llm"}, step_id="hops")
    assert asked.required_models() == {"params.follow_up_model": str(missing)}
    assert create("retrieve.multi_hop", params, step_id="hops").required_models() == {}


def test_llm_follow_ups_keep_the_steps_timeout_and_retries(sample_index, fault_models):
    """A hanging model server holds the step for the step's timeout, once per call, not the alias's 60 s and two
    retries (about three minutes a call)."""
    hanging = multi_hop(sample_index, documents_per_hop=1, follow_up_k=5, follow_up="llm",
                        follow_up_model="fault-slow", follow_up_timeout=0.5, follow_up_retries=0)
    out = hanging(queries(2))
    assert fault_models.attempts["slow"] == 2  # one call for each question's seed, none retried
    marks = hanging.drain_metadata()
    timed_out = "the server sent nothing for 0.5 s (the timeout)"
    assert all(timed_out in meta["degraded"]["reason"] for meta in marks.values()) and len(marks) == 2
    assert out.num_rows > 0  # the seed titles searched instead
