"""``tessera cache clear --operator NAME`` / ``StepCache.clear_operator``: one operator's stored outputs (every step,
params and version of it, its saved model calls) are deleted and every other step's kept, for a change its key
cannot see (a model file replaced at the same path). Before, the only way was to clear the whole cache, whose other
steps may have taken hours. A real flow, a real SQLite cache in tmp_path, the command line in-process."""

from __future__ import annotations

import json

import pytest

from flows.api import Flow
from flows.cache import CacheError, StepCache, step_key
from flows.cache_calls import BatchCalls
from flows.commands import main
from operators.registry import create
from operators.testing import SAMPLE_CORPUS

QUERIES = ["honey bees", "opera singers", "mountain rivers"]


def flow(k: int = 5) -> Flow:
    return Flow.load({"name": "counted", "steps": {
        "bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": str(SAMPLE_CORPUS), "k": k}},
        "words": {"op": "analyze.word_count"},
        "top": {"op": "postprocess.reduce", "params": {"k": 3}}}})


def hits(result) -> dict[str, str]:
    return {step: f"{record.hits}/{record.units}" for step, record in result.steps.items()}


def test_clearing_one_operator_recomputes_its_steps_alone_and_keeps_every_other_steps_outputs(tmp_path):
    cache = tmp_path / "cache"
    first = flow().run(QUERIES, cache=cache)
    flow(k=8).run(QUERIES, cache=cache)  # the same operator with other params: its outputs go too
    before = StepCache(cache).summary()
    done = StepCache(cache).clear_operator("retrieve.corpus_bm25")
    assert done["units"] == 6 and done["files"] == 2 and done["calls"] == 0 and done["bytes"] > 0
    after = StepCache(cache).summary()
    assert after["units"] == before["units"] - 6 and after["files"] == before["files"] - 2
    assert len(list((cache / "data").glob("*.arrow"))) == after["files"]
    again = flow().run(QUERIES, cache=cache)
    words = first.steps["words"].units
    assert hits(again) == {"bm25": "0/3", "words": f"{words}/{words}", "top": "3/3"}
    assert again.table.equals(first.table)
    assert hits(flow().run(QUERIES, cache=cache)) == {"bm25": "3/3", "words": f"{words}/{words}", "top": "3/3"}
    assert StepCache(cache).clear_operator("retrieve.corpus_bm25")["units"] == 3  # k=5's, stored again; not k=8's


def test_an_alias_names_its_operator_and_saved_model_calls_go_with_it(tmp_path):
    """A batch's saved model calls (``flows.cache_calls``) are stored under their step's key too."""
    cache = StepCache(tmp_path / "cache")
    op = create("analyze.dimensions", {})
    calls = BatchCalls(cache, step_key(op))
    calls.record(b"prompt one", {"text": "1969"})
    calls.record(b"prompt two", {"text": "Paris"})
    other = BatchCalls(cache, step_key(create("analyze.word_count", {})))
    other.record(b"prompt", {"text": "kept"})
    assert cache.clear_operator("DimensionExtractionStep") == {"operator": "analyze.dimensions", "units": 0,
                                                               "calls": 2, "files": 0, "bytes": 0}
    assert BatchCalls(cache, step_key(op)).recall([b"prompt one", b"prompt two"]) == {}
    assert list(BatchCalls(cache, step_key(create("analyze.word_count", {}))).recall([b"prompt"]).values()) == [
        {"text": "kept"}]


def test_a_name_no_operator_has_is_refused_with_the_close_names_and_what_the_cache_holds(tmp_path):
    flow().run(QUERIES, cache=tmp_path / "cache")
    held = StepCache(tmp_path / "cache").summary()["units"]
    with pytest.raises(CacheError) as err:
        StepCache(tmp_path / "cache").clear_operator("retrieve.corpus_bm2")
    assert err.value.field == "operator"
    assert err.value.message == ("no operator 'retrieve.corpus_bm2'; did you mean 'retrieve.corpus_bm25'?; the cache "
                                 "holds outputs of analyze.word_count, postprocess.reduce, retrieve.corpus_bm25")
    assert StepCache(tmp_path / "cache").summary()["units"] == held  # nothing deleted
    assert StepCache(tmp_path / "none").clear_operator("retrieve.corpus_bm25")["units"] == 0  # no cache: none


def test_the_command_says_what_it_removed_and_json_counts_it(tmp_path, capfd):
    cache = tmp_path / "cache"
    words = flow().run(QUERIES, cache=cache).steps["words"].units
    argv = ["cache", "clear", "--operator", "analyze.word_count", "--cache-dir", str(cache)]
    assert main(argv) == 0
    out = capfd.readouterr().out
    assert out.startswith(f"cleared analyze.word_count from {cache}: removed {words} stored unit(s) in 1 file(s), ")
    assert main([*argv, "--json"]) == 0
    assert json.loads(capfd.readouterr().out) == {"cache_dir": str(cache), "operator": "analyze.word_count",
                                                  "units": 0, "calls": 0, "files": 0, "bytes": 0}
    assert main([*argv[:3], "analyse.word_count", *argv[4:]]) == 2
    assert "did you mean 'analyze.word_count'?" in capfd.readouterr().err


def test_a_name_of_another_operator_than_the_cache_holds_says_which_it_names_and_what_the_cache_holds(tmp_path, capfd):
    """``bm25``, the step's name in most flows, is the alias of ``retrieve.bm25``: the command said only 'nothing of
    bm25 stored', as if the step held nothing, and kept the step's outputs without saying why."""
    cache = tmp_path / "cache"
    flow().run(QUERIES, cache=cache)
    held = StepCache(cache).summary()["units"]
    argv = ["cache", "clear", "--operator", "bm25", "--cache-dir", str(cache)]
    assert main(argv) == 0
    assert capfd.readouterr().out == (f"nothing of retrieve.bm25 stored at {cache} ('bm25' names the operator "
                                      "retrieve.bm25); it holds outputs of analyze.word_count, postprocess.reduce, "
                                      "retrieve.corpus_bm25\n")
    assert main([*argv, "--json"]) == 0
    assert json.loads(capfd.readouterr().out)["operator"] == "retrieve.bm25"
    assert StepCache(cache).summary()["units"] == held
