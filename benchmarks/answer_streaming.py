"""How soon a chat shows an answer that streams (``operators.generate.answer_stream``), and what streaming costs.

``rag`` over an index, its answer written in sentences (``style: sentences``, ``max_tokens``: a
chat's answer, not rag's short span), on the local executor with no step cache, as the service's
``/v1/chat/completions`` runs it. Each question is asked twice, streamed and not, in alternating
order, so a noisy neighbour hits both alike. Printed: the seconds until the first piece of the
answer reaches the sink and until the flow ends (streamed), the flow's seconds unstreamed, and the
ratios first piece / whole answer and streamed / unstreamed.

    .venv/bin/python benchmarks/answer_streaming.py [--index .tessera/indices/sample] [--model local]
        [--max-tokens 96] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

QUESTIONS = ["Which insects make honey?", "What is a gothic cathedral?", "Who composed operas in the nineteenth "
             "century?", "How do bees make honey?", "What does an aphid feed on?", "Which opera did Verdi write?"]


def main() -> None:
    import pyarrow as pa

    from flows.executors import make_executor
    from flows.spec import FlowSpec
    from operators.generate.answer_stream import streaming_answers

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", default=".tessera/indices/sample")
    parser.add_argument("--model", default="local")
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--rounds", type=int, default=3, help="times each question is asked each way")
    args = parser.parse_args()

    spec = FlowSpec.load("rag").with_index(args.index)
    steps = dict(spec.steps)
    steps["answer"] = steps["answer"].model_copy(update={"params": {
        **steps["answer"].params, "style": "sentences", "max_tokens": args.max_tokens, "model": args.model}})
    flow = spec.model_copy(update={"steps": steps}).build()
    executor = make_executor("local", keep_history=False)

    def ask(number: int, question: str, streamed: bool) -> tuple[float | None, float, int]:
        queries = pa.table({"qid": [str(number)], "query": [question]})
        first: list[float] = []
        started = time.perf_counter()

        def sink(_qid: str, _text: str) -> None:
            if not first:
                first.append(time.perf_counter() - started)

        if streamed:
            with streaming_answers(sink):
                result = executor.run(flow, queries)
        else:
            result = executor.run(flow, queries)
        whole = time.perf_counter() - started
        usage = result.metadata[str(number)].get("usage", {}).get("answer", {})
        return (first[0] if first else None), whole, int(usage.get("completion_tokens", 0))

    ask(0, QUESTIONS[0], False)  # load the encoders, the index and the model once, before any measure
    firsts, streamed_s, plain_s, tokens = [], [], [], []
    number = 1
    for round_ in range(args.rounds):
        for i, question in enumerate(QUESTIONS):
            order = (True, False) if (i + round_) % 2 == 0 else (False, True)
            for streamed in order:
                first, whole, written = ask(number, question, streamed)
                number += 1
                if streamed:
                    streamed_s.append(whole)
                    tokens.append(written)
                    if first is not None:
                        firsts.append(first)
                else:
                    plain_s.append(whole)
    median = statistics.median
    print(f"rag (answer in sentences, max_tokens {args.max_tokens}, model {args.model}) over {args.index}: "
          f"{len(QUESTIONS)} questions x {args.rounds} rounds, median completion tokens {median(tokens):.0f}")
    print(f"first piece of the answer (streamed)   {median(firsts):7.3f} s  ({len(firsts)} of {len(streamed_s)} "
          "answers streamed a piece)")
    print(f"whole flow, streamed                   {median(streamed_s):7.3f} s")
    print(f"whole flow, unstreamed                 {median(plain_s):7.3f} s")
    print(f"first piece / whole flow               {median(firsts) / median(streamed_s):7.2f}")
    print(f"streamed / unstreamed                  {median(streamed_s) / median(plain_s):7.2f}")


if __name__ == "__main__":
    main()
