"""Follow-up questions in a conversation: what ``query.contextualize`` gives retrieval, on real data.

The conversations come from MuSiQue's decompositions (``questions.jsonl`` of the dev subset): for a
question whose second step refers to the first step's answer ("#1 >> capital" after "Van Hook Township
>> located in the administrative territorial entity", answer "Mountrail County"), the user asks the first
step, the assistant answers it (the gold answer: what a right answer gives the next turn), and the user
follows up with the second step, "#1" said as "it" ("capital of it?"). The relevant paragraph is the
second step's supporting paragraph. Four ways to search the follow-up, each with BM25, dense and hybrid
retrieval (the ``rag`` flow's first steps) over the benchmarker's index of the subset's corpus:

(a) the follow-up alone; (b) ``query.contextualize`` with ``method: history``; (c) with ``method: llm``
(the embedded SmolLM2 rewrites the question); (d) the oracle: "#1" replaced by the first answer.

With ``--hops 3`` the conversations are the three-step chains (step 2 refers to #1, step 3 to #2):
step 1 asked and answered, step 2 asked with "it" and answered, step 3 asked with "it" (meaning step 2's
answer); ``--turns`` compares how many earlier messages the history form takes (``query.contextualize``'s
``turns``).

Recall@10 and nDCG@10 (ir_measures), paired t-test of each way against (a), Holm over (b)-(d)::

    .venv/bin/python benchmarks/followup_retrieval.py [--limit 195] [--methods history llm]
    .venv/bin/python benchmarks/followup_retrieval.py --hops 3 --methods history --turns 1 2 4
"""

from __future__ import annotations

import argparse
import json
import logging
import time

from _common import DATA

MUSIQUE = DATA / "musique_dev_subset"
RETRIEVAL = ("bm25", "dense", "hybrid")


def retrieval_steps(retrieval: str, first: list[str]) -> dict:
    """The retrieval steps, the first searches reading ``first`` (the contextualize step, or [] the queries)."""
    bm25 = {"op": "retrieve.bm25", "params": {"k": 20}, "inputs": first}
    dense = {"op": "retrieve.dense", "params": {"k": 20}, "inputs": first}
    if retrieval != "hybrid":
        return {retrieval: bm25 if retrieval == "bm25" else dense}
    return {"bm25": bm25, "dense": dense, "fused": {"op": "fuse.rrf", "params": {"k": 60}, "inputs": ["bm25", "dense"]}}


def spoken(step: str, it: str, ref: str = "#1") -> str:
    """A decomposition step as a question: '#1 >> capital' -> 'capital of it?'; natural ones keep their words."""
    step = step.replace(ref, it)
    if ">>" in step:
        entity, relation = (part.strip() for part in step.split(">>", 1))
        return f"{relation} of {entity}?"
    return step


def conversations(limit: int | None, hops: int = 2) -> list[dict]:
    """The follow-ups of the dev subset (the last of ``hops`` steps, each referring to the one before), with the
    conversation before it, the oracle question and the relevant paragraph."""
    out = []
    with open(MUSIQUE / "questions.jsonl", encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            steps = q["question_decomposition"]
            if len(steps) < hops or "#" in steps[0]["question"]:
                continue
            refs = [f"#{i}" for i in range(1, hops)]  # step i + 1 refers to step i, and to no earlier one
            if not all(ref in steps[i + 1]["question"] and not any(f"#{j}" in steps[i + 1]["question"]
                                                                   for j in range(1, i + 1))
                       for i, ref in enumerate(refs)):
                continue
            messages = []
            for i in range(hops - 1):
                asked = spoken(steps[i]["question"], "it", refs[i - 1]) if i else spoken(steps[0]["question"], "")
                messages += [{"role": "user", "content": asked}, {"role": "assistant", "content": steps[i]["answer"]}]
            last, ref, before = steps[hops - 1], refs[-1], steps[hops - 2]["answer"]
            out.append({"qid": q["_id"], "messages": messages, "follow_up": spoken(last["question"], "it", ref),
                        "oracle": spoken(last["question"], before, ref),
                        "relevant": q["context_corpus_ids"][last["paragraph_support_idx"]]})
    return out[:limit]


def queries_table(rows: list[dict], way: str):
    import pyarrow as pa

    text = [r["oracle"] if way == "oracle" else r["follow_up"] for r in rows]
    return pa.table({"qid": [r["qid"] for r in rows], "query": text,
                     "messages": [json.dumps(r["messages"]) for r in rows]})


def flow(retrieval: str, method: str | None, index: str, turns: int | None = None):
    from flows.spec import FlowSpec

    params = {"method": method, **({"turns": turns} if turns is not None else {})}
    steps: dict = {} if method is None else {"standalone": {"op": "query.contextualize", "params": params}}
    steps.update(retrieval_steps(retrieval, [] if method is None else ["standalone"]))
    return FlowSpec.parse({"name": f"{retrieval}-{method or 'none'}", "steps": steps}).with_index(index)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="first N conversations (default: all)")
    parser.add_argument("--methods", nargs="+", default=["history", "llm"], choices=["history", "llm"])
    parser.add_argument("--retrieval", nargs="+", default=list(RETRIEVAL), choices=list(RETRIEVAL))
    parser.add_argument("--hops", type=int, default=2, choices=[2, 3], help="2: the second step follows the first; "
                        "3: the third follows the second, after two turns")
    parser.add_argument("--turns", type=int, nargs="+", default=None, help="earlier messages the history form "
                        "takes, one way each (default: query.contextualize's own)")
    args = parser.parse_args()
    logging.getLogger("operators.llm.step").setLevel(logging.ERROR)  # each fallback is counted below instead

    import pyarrow as pa

    from flows.bench.dataset import load_dataset
    from flows.bench.indices import default_root, ensure_index, plan_index
    from flows.bench.metrics import per_query
    from flows.bench.runs import to_run
    from flows.bench.significance import aligned, correct, paired_p
    from flows.executors import make_executor
    from flows.spec import FlowSpec

    rows = conversations(args.limit, args.hops)
    qids = [r["qid"] for r in rows]
    qrels = pa.table({"qid": qids, "docno": [r["relevant"] for r in rows], "relevance": [1] * len(rows)})
    dataset = load_dataset(MUSIQUE)
    plan = plan_index(FlowSpec.parse({"name": "hybrid", "steps": retrieval_steps("hybrid", [])}),
                      dataset.corpus_sha256(), default_root())
    ensure_index(plan, dataset.corpus)
    said = " -> ".join(repr(m["content"]) for m in rows[0]["messages"])
    print(f"{len(rows)} follow-ups from {MUSIQUE.name}; e.g. {said} -> {rows[0]['follow_up']!r} "
          f"(oracle {rows[0]['oracle']!r})")

    executor = make_executor("local", keep_history=False)
    history = [("(b) history", None)] if args.turns is None else [(f"(b) history, turns {t}", t) for t in args.turns]
    ways = [("(a) alone", "alone", None, None),
            *[(label, "alone", "history", turns) for label, turns in history if "history" in args.methods],
            *[("(c) llm", "alone", "llm", None) for _ in [1] if "llm" in args.methods],
            ("(d) oracle", "oracle", None, None)]
    for retrieval in args.retrieval:
        values, seconds, rewrites, degraded = {}, {}, {}, {}
        for label, way, method, turns in ways:
            started = time.perf_counter()
            result = executor.run(flow(retrieval, method, str(plan.path), turns), queries_table(rows, way))
            seconds[label] = time.perf_counter() - started
            values[label] = per_query(to_run(label, result.table), qrels, qids, [10])
            if method is not None:
                rewrites[label] = {q: m.get("standalone_query") for q, m in result.metadata.items()}
                degraded[label] = sum(1 for m in result.metadata.values() if m.get("degraded"))
        print(f"\n{retrieval}: R@10 and nDCG@10 of the second step's paragraph, {len(rows)} follow-ups "
              "(p: paired t-test against (a), Holm over the others)")
        others = [label for label, *_ in ways[1:]]
        for measure in ("R@10", "nDCG@10"):
            ps = [paired_p(*aligned(values[ways[0][0]][measure], values[o][measure], qids)[1:]) for o in others]
            holm = dict(zip(others, correct(ps)))
            for label, *_ in ways:
                mean = sum(values[label][measure].values()) / len(qids)
                extra = "" if label == ways[0][0] else f"  p {dict(zip(others, ps))[label]:.2g}, Holm {holm[label]:.2g}"
                print(f"  {measure:8s} {label:12s} {mean:.3f}{extra}   ({seconds[label]:.1f} s)")
        for label, texts in rewrites.items():
            sample = next(iter(texts.values()), None)
            fell_back = f"; {degraded[label]} rewrite(s) not taken, the history form instead" if degraded[label] else ""
            print(f"  {label}: e.g. {sample!r}{fell_back}")


if __name__ == "__main__":
    main()
