"""How much of the ``rag`` flow's retrieval reaches the answer prompt: ``generate.context``'s ways to fit five
passages into its token budget, side by side, without generating.

The ``rag`` flow's own retrieval (contextualize, BM25 + MiniLM dense, RRF, best chunk per document, top 5) runs
once over the HotpotQA dev subset's questions (the benchmarker's index of its corpus, built when missing); then
each way builds every question's context from the same five passages: ``fit: rank`` (whole blocks in rank order,
the first that does not fit cut at a token, the rest left out: the flow's way before 2026-12-01) and ``fit:
share`` (each passage its best sentence within an equal share of the budget, then further whole sentences for
the best-ranked while they fit: the flow's way since), both with the flow's ``sentences: 2`` and
``max_context_length: 256``; beside them ``fit: rank`` with ``sentences: 1`` and this script's own equal shares
cut at a token (mid-sentence; ``TokenShare``). Per way:
passages in the prompt, questions whose two gold paragraphs both got a block (of all, and of those whose two
are among the five retrieved), questions whose answer (or an alias; yes/no left out) is in the prompt's text
(of all, and of those whose five passages hold it), and the context's tokens as the budget counts them
(litellm's default tokenizer) and as SmolLM2 reads them (its own, from the GGUF's vocabulary), and against the
first way the questions each way gains and loses. Also printed:
the tokens the answer step's prompt adds around the context (the short style's system prompt and example
turns, SmolLM2's chat template), the model's window, and passage lengths on the sample corpus and on HotpotQA::

    nice -n 5 .venv/bin/python benchmarks/context_fit.py [--limit 685] [--budget 256]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
import time
from pathlib import Path

from _common import CACHE, DATA, REPO_ROOT

HOTPOTQA = DATA / "hotpotqa_dev_subset"
SAMPLE = REPO_ROOT / "data" / "sample" / "corpus.jsonl"
#: Steps of the rag flow after its retrieval.
AFTER_RETRIEVAL = ("context", "answer", "references")


def ways(budget: int) -> dict[str, dict]:
    base = {"max_context_length": budget, "sentences": 2}
    return {"rank (before)": {**base, "fit": "rank"}, "share": {**base, "fit": "share"},
            "rank, 1 sentence": {**base, "sentences": 1, "fit": "rank"}}


def questions(limit: int | None) -> list[dict]:
    with open(HOTPOTQA / "questions.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()][:limit]


def retrieved(rows: list[dict]):
    """The rag flow's five passages per question (cached by index, retrieval steps and questions)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from flows.bench.dataset import load_dataset
    from flows.bench.indices import default_root, ensure_index, plan_index
    from flows.executors import make_executor
    from flows.spec import FlowSpec
    from flows.specfile import load_yaml
    from flows.store import builtin_path

    data = load_yaml(builtin_path("rag").read_text(encoding="utf-8"))
    data["steps"] = {k: v for k, v in data["steps"].items() if k not in AFTER_RETRIEVAL}
    spec = FlowSpec.parse(data)
    dataset = load_dataset(HOTPOTQA)
    plan = plan_index(spec, dataset.corpus_sha256(), default_root())
    ensure_index(plan, dataset.corpus, progress=False)
    steps = hashlib.sha256(json.dumps(data["steps"], sort_keys=True).encode()).hexdigest()[:12]
    cached = CACHE / "context_fit" / f"{plan.key}-{steps}-{len(rows)}.parquet"  # this index, these steps
    if cached.is_file():
        return pq.read_table(cached)
    queries = pa.table({"qid": [r["_id"] for r in rows], "query": [r["question"] for r in rows]})
    started = time.perf_counter()
    table = make_executor("local", keep_history=False).run(spec.with_index(str(plan.path)), queries).table
    print(f"rag retrieval over {len(rows)} questions: {time.perf_counter() - started:.0f} s")
    table = table.select([c for c in ("qid", "query", "docno", "doc_id", "rank", "title", "text", "score")
                          if c in table.column_names])
    cached.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, cached)
    return table


def normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().casefold()


def answers(row: dict) -> list[str]:
    said = [a for a in [row["answer"], *row.get("answer_aliases", [])] if a]
    return [] if normal(row["answer"]) in ("yes", "no") else [normal(a) for a in said]


def smollm2():
    """SmolLM2's tokenizer (the GGUF's vocabulary alone) and its chat template."""
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from operators.llm.embedded_model import gguf_path

    llama = Llama(model_path=str(gguf_path("smollm2-135m-instruct")), vocab_only=True, verbose=False)
    template = Jinja2ChatFormatter(llama.metadata["tokenizer.chat_template"], eos_token="<|im_end|>",
                                   bos_token="<|im_start|>")
    return llama, template


def prompt_overhead(llama, template) -> int:
    """SmolLM2 tokens of the rag answer step's prompt with an empty context and a typical question."""
    from operators.registry import create

    answer = create("generate.answer", {"model": "local", "max_tokens": 16, "style": "short"})
    messages = answer.render(query="Which city hosted the 1936 Summer Olympics?", context="")
    prompt = template(messages=messages).prompt
    return len(llama.tokenize(prompt.encode(), add_bos=False, special=True))


def lengths(path: Path, count, limit: int = 2000) -> str:
    from operators.preprocess._chunk_units import punkt_tokenizer, sentence_spans

    docs, sentences = [], []
    with open(path, encoding="utf-8") as f:
        for line in list(f)[:limit]:
            text = json.loads(line).get("text") or ""
            docs.append(count(text))
            sentences += [count(text[a:b]) for a, b in sentence_spans(text, punkt_tokenizer("english"))]
    q = statistics.quantiles
    return (f"passage tokens median {statistics.median(docs):.0f} (p90 {q(docs, n=10)[-1]:.0f}); "
            f"sentence median {statistics.median(sentences):.0f} (p90 {q(sentences, n=10)[-1]:.0f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="first N questions (default: all 685)")
    parser.add_argument("--budget", type=int, default=256, help="max_context_length (the rag flow's: 256)")
    args = parser.parse_args()

    from operators.llm.embedded_model import CONTEXT_TOKENS
    from operators.registry import create
    from operators.tables import in_rank_order, qid_groups

    rows = questions(args.limit)
    table = retrieved(rows)
    by_qid = {r["_id"]: r for r in rows}
    llama, template = smollm2()
    real = lambda text: len(llama.tokenize(text.encode(), add_bos=False))  # noqa: E731
    builders = {name: create("generate.context", params) for name, params in ways(args.budget).items()}
    for builder in builders.values():
        builder.setup()
    builders = {**builders, "share, token cut": TokenShare(args.budget)}
    count = next(iter(builders.values()))._count
    print(f"SmolLM2 window {CONTEXT_TOKENS} tokens; the answer prompt around the context "
          f"{prompt_overhead(llama, template)} SmolLM2 tokens; answer max_tokens 16; context budget {args.budget} "
          "tokens counted with litellm's default tokenizer")
    print(f"sample corpus: {lengths(SAMPLE, count)}\nHotpotQA corpus: {lengths(HOTPOTQA / 'corpus.jsonl', count)}")

    groups = [(qid, in_rank_order(group).to_pylist()) for qid, group in qid_groups(table)]
    five_gold = sum(set(by_qid[q]["supporting_corpus_ids"]) <= {r["doc_id"] for r in g} for q, g in groups)
    answerable = [q for q, _ in groups if answers(by_qid[q])]
    in_five = {q for q, g in groups if answers(by_qid[q])
               and any(a in normal(" ".join(r["text"] or "" for r in g)) for a in answers(by_qid[q]))}
    whole = [sum(count(f"[Document {i}] {r['title']}\n" + _best(r, g)) for i, r in enumerate(g, 1)) for _, g in groups]
    print(f"{len(groups)} questions; both gold among the five retrieved: {five_gold}; answer (not yes/no) in the "
          f"five passages: {len(in_five)} of {len(answerable)}; five 2-sentence blocks need median "
          f"{statistics.median(whole):.0f} tokens (p90 {statistics.quantiles(whole, n=10)[-1]:.0f})\n")
    print(f"{'way':18s} {'passages':>8s} {'all 5':>6s} {'both gold':>10s} {'of 5-gold':>9s} {'answer':>7s} "
          f"{'of in-5':>7s} {'tokens':>7s} {'SmolLM2':>8s} {'max':>5s} {'ms/q':>5s}  against the first way")
    first: tuple[set, set] | None = None
    for name, builder in builders.items():
        placed, full, gold, answer, tokens, smol, seconds = [], 0, set(), set(), [], [], 0.0
        for qid, group in groups:
            started = time.perf_counter()
            blocks, numbers = builder.build(group, group[0]["query"])
            context = "\n\n".join(blocks)
            seconds += time.perf_counter() - started
            shown = {r["doc_id"] for r, n in zip(group, numbers) if n is not None}
            placed.append(len(shown))
            full += len(shown) == 5
            if set(by_qid[qid]["supporting_corpus_ids"]) <= shown:
                gold.add(qid)
            if any(a in normal(context) for a in answers(by_qid[qid])):
                answer.add(qid)
            tokens.append(count(context))
            smol.append(real(context))
        n = len(groups)
        first = first or (gold, answer)
        paired = (f"both gold +{len(gold - first[0])} -{len(first[0] - gold)}, "
                  f"answer +{len(answer - first[1])} -{len(first[1] - answer)}")
        print(f"{name:18s} {statistics.mean(placed):8.2f} {full / n:6.1%} {len(gold) / n:10.1%} "
              f"{len(gold) / max(five_gold, 1):9.1%} {len(answer) / len(answerable):7.1%} "
              f"{len(answer & in_five) / max(len(in_five), 1):7.1%} {statistics.mean(tokens):7.0f} "
              f"{statistics.mean(smol):8.0f} {max(smol):5d} {1000 * seconds / n:5.1f}  {paired}")


class TokenShare:
    """The benchmark's own third way (not an option of the operator): every block within an equal share of the
    budget, what a short block leaves going to the longer ones, cut at a token (mid-sentence) instead of at
    sentences."""

    def __init__(self, budget: int) -> None:
        from operators.registry import create

        self._op = create("generate.context", {"max_context_length": budget, "sentences": 2})
        self._op.setup()
        self.budget = budget

    def build(self, rows: list[dict], query: str) -> tuple[str, list[int | None]]:
        op = self._op
        full = [op._header(r, n) + _best(r, rows) for n, r in enumerate(rows, 1)]
        blocks: list[str] = [""] * len(rows)
        left = self.budget
        for order, i in enumerate(sorted(range(len(rows)), key=lambda i: op._count(full[i] + "\n\n"))):
            share = left // (len(rows) - order)
            block = full[i] if op._count(full[i] + "\n\n") <= share else op._cut(full[i], share)
            blocks[i] = block
            left -= min(op._count(block + "\n\n"), share)
        return "\n\n".join(blocks), list(range(1, len(rows) + 1))


def _best(row: dict, group: list[dict]) -> str:
    from operators.generate.sentences import best_sentences

    return best_sentences((row["text"] or "").strip(), group[0]["query"], 2)


if __name__ == "__main__":
    main()
