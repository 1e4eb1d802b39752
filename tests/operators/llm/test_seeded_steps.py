"""An LLM step's ``seed``: above temperature 0 its calls sample the seed's reply (the embedded model, llama.cpp
in-process), so the step is cached as a greedy one is, while an unseeded sampled step still samples afresh each run.
The step had no such param (a spec's ``seed`` was refused as unknown), and a chat's seed reached no step."""

from __future__ import annotations

import pyarrow as pa
import pytest

from flows.cache import StepCache
from flows.executors.local import LocalExecutor
from flows.spec import FlowSpec
from operators.llm.seeds import call_seed, seeding_choices

QUERIES = pa.table({"qid": ["1", "2"], "query": ["What do bees make?", "Where do whales live?"]})

pytestmark = pytest.mark.integration  # the embedded model answers


def closed_book(**params) -> FlowSpec:
    return FlowSpec.parse({"name": "sampled", "steps": {"answer": {"op": "generate.answer", "params": {
        "model": "local", "context_column": None, "temperature": 1.5, "max_tokens": 16, **params}}}})


def answers(result) -> dict[str, str]:
    return {qid: result.metadata[qid].get("answer") for qid in QUERIES.column("qid").to_pylist()}


def test_a_seeded_sampled_step_is_cached_and_an_unseeded_one_samples_afresh(tmp_path):
    executor = LocalExecutor(cache=StepCache(tmp_path / "cache"))
    first, again = (executor.run(closed_book(seed=11).build(), QUERIES) for _ in range(2))
    assert all(answers(first).values()) and answers(again) == answers(first)
    assert (first.steps["answer"].hit_ratio, again.steps["answer"].hit_ratio) == (0.0, 1.0)
    fresh = LocalExecutor(cache=StepCache(tmp_path / "other")).run(closed_book(seed=11).build(), QUERIES)
    assert answers(fresh) == answers(first)  # the seed's replies, not the cache's
    unseeded = [executor.run(closed_book().build(), QUERIES) for _ in range(2)]
    assert not unseeded[1].steps["answer"].hit_ratio and answers(unseeded[0]) != answers(unseeded[1])


def test_a_choice_s_calls_sample_with_the_seed_moved_on_by_its_index():
    """As a served model's n choices do; 64-bit seeds wrap round, as OpenAI's are 64-bit."""
    with seeding_choices({"1#1": 0, "1#2": 1}):
        assert [call_seed(7, qid) for qid in ("1#1", "1#2", "2")] == [7, 8, 7]
        assert call_seed(2**63 - 1, "1#2") == -2**63 and call_seed(None, "1#2") is None
    assert call_seed(7, "1#2") == 7  # outside a chat's choices


def test_a_served_models_choices_move_the_seed_on_as_a_64_bit_sum():
    from serve.deployments.llm import choice_body

    top = 2**63 - 1
    assert [choice_body({"seed": top}, i)["seed"] for i in range(3)] == [top, -2**63, -2**63 + 1]
    assert choice_body({"seed": 5}, 2)["seed"] == 7 and choice_body({}, 2) == {}
