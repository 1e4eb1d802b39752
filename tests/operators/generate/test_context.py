"""generate.context: numbered blocks in rank order, the token budget, the numbers answers cite."""

from __future__ import annotations

import pyarrow as pa

from operators.registry import create
from operators.testing import OperatorContract, sample_results


class TestContextContract(OperatorContract):
    operator_name = "generate.context"


def test_blocks_in_rank_order_with_titles_and_numbers():
    table = sample_results(1, 3)
    reversed_rows = table.take(pa.array([2, 0, 1]))
    out = create("generate.context", {"include_scores": True})(reversed_rows)
    context = out.column("context")[0].as_py()
    titles = table.column("title").to_pylist()
    assert context.startswith(f"[Document 1] {titles[0]} (score 3.000)\n")
    assert context.index(f"[Document 2] {titles[1]}") < context.index(f"[Document 3] {titles[2]}")
    numbers = dict(zip(out.column("docno").to_pylist(), out.column("context_index").to_pylist()))
    assert [numbers[d] for d in table.column("docno").to_pylist()] == [1, 2, 3]
    assert set(out.column("context").to_pylist()) == {context}  # the same context on every row of the query


def test_the_token_budget_cuts_and_leaves_out():
    import litellm

    table = sample_results(1, 5)
    out = create("generate.context", {"max_context_length": 120})(table)
    context = out.column("context")[0].as_py()
    assert litellm.token_counter(model="gpt-3.5-turbo", text=context) <= 125
    numbers = out.column("context_index").to_pylist()
    assert numbers[0] == 1 and None in numbers and numbers == sorted(numbers, key=lambda n: n is None)
    assert create("generate.context", {"max_documents": 2})(table).column("context_index").to_pylist() == \
        [1, 2, None, None, None]


def test_docno_when_there_is_no_title():
    table = sample_results(1, 2).drop_columns(["title"])
    context = create("generate.context")(table).column("context")[0].as_py()
    assert context.startswith(f"[Document 1] {table.column('docno')[0].as_py()}\n")


def test_a_misspelt_model_alias_is_refused_as_the_answer_step_refuses_it():
    """It was taken, and the budget counted with a tokenizer litellm does not know, without a word."""
    import pytest

    from operators.errors import ParamsError

    with pytest.raises(ParamsError) as err:
        create("generate.context", {"model": "locl"}, step_id="context")
    assert err.value.field == "params.model" and "did you mean 'local'" in str(err.value)


def test_a_passage_of_punctuation_alone_keeps_its_opening_and_the_others_their_best_sentences():
    """bm25s cannot index sentences that have no token: one such passage among the best five failed the whole run
    (`max() arg is an empty sequence`), for every query it was in."""
    table = sample_results(1, 3)
    texts = table.column("text").to_pylist()
    texts[1] = "!!! ??? ... ,,, --- ;;; ::: . The. And of!"
    table = table.set_column(table.column_names.index("text"), "text", pa.array(texts))
    out = create("generate.context", {"sentences": 1, "max_context_length": 400})(table)
    context = out.column("context")[0].as_py()
    block = context.split("[Document 2]")[1].split("[Document 3]")[0]
    assert "!!! ???" in block and "[Document 3]" in context


def test_best_last_lists_the_same_blocks_and_numbers_the_other_way_round():
    table = sample_results(1, 4)
    for fit in ("rank", "share"):
        params = {"fit": fit, "max_context_length": 400, "sentences": 1}
        first = create("generate.context", params)(table)
        last = create("generate.context", {**params, "order": "best_last"})(table)
        blocks = first.column("context")[0].as_py().split("\n\n")
        assert last.column("context")[0].as_py().split("\n\n") == blocks[::-1]
        assert blocks[0].startswith("[Document 1] ") and len(blocks) == 4
        assert last.column("context_index").to_pylist() == first.column("context_index").to_pylist()


def test_an_alias_pointed_at_another_model_misses_the_cache(tmp_path, monkeypatch):
    """The budget is counted with the tokenizer of the model the alias names now: with the alias pointed elsewhere
    (a models file, ``$TESSERA_MODELS``) the context is cut elsewhere, and a cached run replayed the old one."""
    from flows.cache import StepCache
    from flows.executors.local import LocalExecutor
    from flows.spec import FlowSpec

    flow = FlowSpec.parse({"name": "ctx", "steps": {"context": {
        "op": "generate.context", "params": {"max_context_length": 80, "model": "ctxm"}}}})
    text = "Bees are winged insects that form a monophyletic clade Anthophila within the superfamily Apoidea. " * 3
    results = pa.table({"qid": ["q1"] * 2, "query": ["bees"] * 2, "docno": ["d1", "d2"], "title": ["Bee", "Wasp"],
                        "text": [text] * 2, "score": [2.0, 1.0], "rank": [1, 2]})
    cache = StepCache(tmp_path / "cache")

    def context(model: str, **options) -> tuple[str, int]:
        models = tmp_path / f"{model.replace('/', '_')}.yaml"
        models.write_text(f"ctxm: {model}\n")
        monkeypatch.setenv("TESSERA_MODELS", str(models))
        result = LocalExecutor(**options).run(flow, results)
        return result.table.column("context")[0].as_py(), result.steps["context"].hits

    fresh = {model: context(model)[0] for model in ("ollama/llama3", "openai/gpt-4o")}  # no cache
    assert fresh["ollama/llama3"] != fresh["openai/gpt-4o"]  # the two tokenizers cut the texts apart
    assert context("ollama/llama3", cache=cache) == (fresh["ollama/llama3"], 0)
    assert context("openai/gpt-4o", cache=cache) == (fresh["openai/gpt-4o"], 0)  # not the other's, replayed
    assert context("ollama/llama3", cache=cache) == (fresh["ollama/llama3"], 1)
