"""The step cache: what goes into a key, what hits, what misses, and safety across processes."""

from __future__ import annotations

import subprocess
import sys

import cloudpickle
import pyarrow as pa
import pytest
from pydantic import BaseModel, ConfigDict

from flows.cache import CacheError, StepCache, row_unit_keys, step_key, table_unit_key
from flows.executors.local import LocalExecutor
from flows.runner import StepRunner
from flows.spec import FlowSpec
from operators import create
from operators.base import Operator
from operators.errors import OperatorError
from operators.tables import set_column
from operators.testing import sample_results

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # RowNotes runs in Ray workers too


class RowNotes(Operator):
    """Row scope: a per-row column, and per query a note of how many of its rows this step has seen."""

    name = "test.row_notes"
    scope = "row"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")

    def produces(self) -> dict[str, str]:
        return {"noted": "data"}

    def transform(self, table: pa.Table) -> pa.Table:
        for qid in table.column("qid").to_pylist():
            seen = self.notes().metadata.get(qid, {}).get("notes", {}).get(self.step_id, 0)
            self.emit_metadata(qid, "notes", {self.step_id: seen + 1})
        return set_column(table, "noted", pa.array([True] * table.num_rows))

STEPS = {
    "words": {"op": "analyze.word_count"},
    "title_words": {"op": "analyze.word_count", "params": {"input_column": "title", "output_column": "n_title"}},
    "top": {"op": "postprocess.reduce", "params": {"k": 3}},
}


def spec(**changes) -> FlowSpec:
    steps = {name: {**step, "params": {**step.get("params", {}), **changes.get(name, {})}}
             for name, step in STEPS.items()}
    return FlowSpec.parse({"name": "cached", "steps": steps})


def hit_ratios(result) -> dict[str, float | None]:
    return {step: record.hit_ratio for step, record in result.steps.items()}


def test_second_identical_run_is_served_from_cache(cache):
    results = sample_results(3, 8)
    first = LocalExecutor(cache=cache).run(spec(), results)
    second = LocalExecutor(cache=cache).run(spec(), results)
    assert hit_ratios(first) == {"words": 0.0, "title_words": 0.0, "top": 0.0}
    assert hit_ratios(second) == {"words": 1.0, "title_words": 1.0, "top": 1.0}
    assert second.cache_hit_ratio == 1.0
    assert second.table.equals(first.table)
    assert "cache hit ratio 100%" in second.description()


def test_hit_ratio_does_not_depend_on_batching(cache):
    results = sample_results(3, 8)
    LocalExecutor(cache=cache).run(spec(), results)
    small_batches = FlowSpec.parse({"name": "cached", "steps": {
        name: {**step, "batch_size": 5} for name, step in STEPS.items()}})
    again = LocalExecutor(cache=cache).run(small_batches, results)
    assert again.cache_hit_ratio == 1.0


def test_changing_a_param_misses_from_that_step_on_and_hits_before(cache):
    results = sample_results(3, 8)
    LocalExecutor(cache=cache).run(spec(), results)
    changed = LocalExecutor(cache=cache).run(spec(title_words={"output_column": "title_len"}), results)
    assert hit_ratios(changed) == {"words": 1.0, "title_words": 0.0, "top": 0.0}
    changed_k = LocalExecutor(cache=cache).run(spec(top={"k": 2}), results)
    assert hit_ratios(changed_k) == {"words": 1.0, "title_words": 1.0, "top": 0.0}
    assert set(changed_k.table.column("rank").to_pylist()) == {1, 2}


def test_documents_with_identical_text_keep_their_own_ids_and_outputs(cache):
    text = "Honey bees pollinate flowers and make honey."
    table = pa.table({"qid": ["q1", "q1", "q2"], "docno": ["a", "b", "c"], "title": ["A", "B", "C"],
                      "text": [text, text, "Another text entirely, longer than the first one."]})
    op = create("analyze.word_count", step_id="words")
    for run in range(2):
        out, stats = StepRunner(op, cache).run(table)
        assert out.column("docno").to_pylist() == ["a", "b", "c"]
        assert out.column("title").to_pylist() == ["A", "B", "C"]
        assert out.column("word_count").to_pylist() == [7, 7, 8]
        assert stats.hits == (0 if run == 0 else 3)


def test_keys_are_length_prefixed_so_shifted_strings_do_not_collide():
    key = step_key(create("analyze.word_count"))
    a = pa.table({"x": ["ab"], "y": ["c"]})
    b = pa.table({"x": ["a"], "y": ["bc"]})
    assert row_unit_keys(a, ["x", "y"], key) != row_unit_keys(b, ["x", "y"], key)
    assert table_unit_key(pa.table({"x": ["ab", "c"]}), key) != table_unit_key(pa.table({"x": ["a", "bc"]}), key)
    assert table_unit_key(pa.table({"x": ["", None]}), key) != table_unit_key(pa.table({"x": [None, ""]}), key)
    assert table_unit_key(pa.table({"x": [1]}), key) != table_unit_key(pa.table({"x": ["1"]}), key)


def test_keys_ignore_schema_metadata_but_not_values_or_params():
    op = create("postprocess.reduce", {"k": 2})
    key = step_key(op)
    table = sample_results(1, 3)
    stamped = table.replace_schema_metadata({"created": "2026-11-22T03:00:00"})
    assert table_unit_key(table, key) == table_unit_key(stamped, key)
    assert step_key(create("postprocess.reduce", {"k": 3})) != key
    changed = table.set_column(table.column_names.index("text"), "text", pa.array(["x", "y", "z"]))
    assert table_unit_key(changed, key) != table_unit_key(table, key)


def test_a_row_step_that_comes_to_write_another_column_misses_its_old_entries(tmp_path):
    """A row unit stores only the columns its step writes: when a step declares one more (as the query rewriters
    did when they came to store their qid and query), entries stored without it are not replayed."""
    from operators.analyze.word_count import WordCounter as WordCount

    class WordCountAndMore(WordCount):
        name = "analyze.word_count"  # the same operator, version and params: only what it writes changed

        def produces(self) -> dict[str, str]:
            return {**super().produces(), "more": "data"}

        def transform(self, table: pa.Table) -> pa.Table:
            out = super().transform(table)
            return out.append_column("more", pa.array(["x"] * out.num_rows))

    cache, table = StepCache(tmp_path / "cache"), sample_results(1, 3)
    assert step_key(WordCountAndMore()) != step_key(create("analyze.word_count"))
    StepRunner(create("analyze.word_count"), cache).run(table)
    out, stats = StepRunner(WordCountAndMore(), cache).run(table)
    assert stats.hits == 0 and out.column("more").to_pylist() == ["x", "x", "x"]


def test_a_row_step_that_changes_an_undeclared_column_is_refused_naming_it(tmp_path):
    """A hit takes the columns a row step does not declare from its input row: a step that upper-cased ``text``
    without declaring it gave upper case on the first run and the text as it went in on the second, silently."""
    from operators.analyze.word_count import WordCounter as WordCount

    class Shouting(WordCount):
        def transform(self, table: pa.Table) -> pa.Table:
            out = super().transform(table)
            return set_column(out, "text", pa.array([t.upper() for t in out.column("text").to_pylist()]))

    cache, table = StepCache(tmp_path / "cache"), sample_results(1, 3)
    with pytest.raises(OperatorError, match=r"it changed column\(s\) 'text' of its input without declaring them"):
        StepRunner(Shouting(step_id="loud"), cache).run(table)
    assert cache.get(row_unit_keys(table, ["text"], step_key(Shouting(step_id="loud")))) == {}  # nothing stored
    out, _ = StepRunner(Shouting(step_id="loud"), None).run(table)  # no cache: nothing to give back wrong
    assert out.column("text").to_pylist() == [t.upper() for t in table.column("text").to_pylist()]
    large = table.set_column(table.column_names.index("text"), "text", table.column("text").cast(pa.large_string()))
    out, _ = StepRunner(WordCount(step_id="words"), cache).run(large)  # a cast of the same values is no change
    assert out.column("text").to_pylist() == table.column("text").to_pylist()


def test_a_row_step_with_some_rows_cached_orders_its_columns_as_without_the_cache(tmp_path):
    """``preprocess.chunk`` rewrites docno and text: with some rows from the cache they came after the columns it
    passes through (``title, docno, text``), without the cache in their place (``docno, title, text``)."""
    table = sample_results(2, 4)
    cache = StepCache(tmp_path / "cache")
    chunk = create("preprocess.chunk", {"size": 40, "overlap": 0}, step_id="chunk")
    StepRunner(chunk, cache).run(table.slice(0, 3))
    partly, stats = StepRunner(chunk, cache).run(table)
    alone, _ = StepRunner(chunk, None).run(table)
    assert 0 < stats.hits < table.num_rows
    assert partly.column_names == alone.column_names and partly.equals(alone)


def test_a_renamed_retriever_misses_the_entries_of_its_old_name(tmp_path):
    """A retriever names two of its columns after its step (score_<step>, rank_<step>): a copy of a flow with its
    retrievers renamed, run over the same cache, must not replay the old names' columns (its fusion step then
    found no rank_<step> and the run failed; the other way round too)."""
    from flows.api import Flow
    from operators.testing import SAMPLE_CORPUS

    def fused(first: str, second: str) -> Flow:
        corpus = {"corpus": str(SAMPLE_CORPUS)}
        return Flow.load({"name": "renamed", "steps": {
            first: {"op": "retrieve.corpus_bm25", "params": {**corpus, "k": 5}},
            second: {"op": "retrieve.corpus_bm25", "params": {**corpus, "k": 8}},
            "fused": {"op": "fuse.rrf", "inputs": [first, second]}}})

    cache = tmp_path / "cache"
    before = fused("bm25", "more").run(["honey bees", "opera singers"], cache=cache)
    after = fused("lex", "wide").run(["honey bees", "opera singers"], cache=cache)
    assert {"rank_lex", "rank_wide"} <= set(after.table.column_names) and "rank_bm25" not in after.table.column_names
    assert after.table.column("docno").to_pylist() == before.table.column("docno").to_pylist()
    again = fused("bm25", "more").run(["honey bees", "opera singers"], cache=cache)
    assert again.table.column("docno").to_pylist() == before.table.column("docno").to_pylist()


def test_cache_persists_across_instances(tmp_path):
    results = sample_results(2, 5)
    LocalExecutor(cache=StepCache(tmp_path / "c")).run(spec(), results)
    again = LocalExecutor(cache=StepCache(tmp_path / "c")).run(spec(), results)
    assert again.cache_hit_ratio == 1.0


#: Four writer processes, each with its own ``StepCache`` on ``root`` writing a shifted slice of the same rows 3
#: times, all at once. Forked from one process that imported the modules first (no thread runs there yet), so the
#: writers share the imports' second of CPU each but nothing else: their caches, files and locks are their own.
WRITERS = """
import os, sys, traceback
from flows.cache import StepCache
from flows.runner import StepRunner
from operators import create
from operators.testing import sample_results
root = sys.argv[1]
writers = []
for shift in (0, 1, 2, 3):
    pid = os.fork()
    if pid == 0:
        try:
            table = sample_results(3, 8)
            table = table.slice(shift, table.num_rows - shift)
            for _ in range(3):
                StepRunner(create("analyze.word_count", step_id="words"), StepCache(root)).run(table)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    writers.append(pid)
print([os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in writers])
"""


@pytest.mark.process
def test_parallel_writers_lose_nothing(tmp_path):
    root = str(tmp_path / "shared")
    done = subprocess.run([sys.executable, "-c", WRITERS, root], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (0, "[0, 0, 0, 0]\n"), done.stderr
    out, stats = StepRunner(create("analyze.word_count", step_id="words"), StepCache(root)).run(sample_results(3, 8))
    assert stats.units == 24 and stats.hits == 24
    direct = create("analyze.word_count")(sample_results(3, 8))
    assert out.equals(direct)


def test_a_unit_stored_by_two_runs_at_once_keeps_one_file_and_a_prune_keeps_the_one_it_reads(tmp_path):
    """Two runs computing the same units at once each wrote a file; the units point into the first, and the other
    file backed nothing yet counted in ``info`` and was kept by a size prune, which removed the one the units read
    (the next run hit nothing)."""
    import os

    root = tmp_path / "shared"
    first, second = StepCache(root), StepCache(root)  # two processes' caches, one folder
    rows = sample_results(1, 4)
    first.put([(b"unit", rows, None)])
    second.put([(b"unit", rows.slice(1), None)])  # the same unit, computed beside it
    assert len(list((root / "data").glob("*.arrow"))) == 1 and second.get([b"unit"])[b"unit"].table.equals(rows)
    orphan = root / "data" / "0123.arrow"  # left by a release before this check
    orphan.write_bytes(b"x" * 10_000)
    os.utime(orphan, (1, 1))
    summary = first.prune(max_bytes=10_000)
    assert summary["files"] == 1 and summary["units"] == 0 and not orphan.exists(), summary
    assert StepCache(root).get([b"unit"])[b"unit"].table.equals(rows)


def test_cache_can_be_turned_off_per_run_and_per_step(cache):
    results = sample_results(2, 5)
    off = LocalExecutor(cache=None).run(spec(), results)
    assert off.cache_hit_ratio is None and "cache off" in off.description()
    per_step = FlowSpec.parse({"name": "cached", "steps": {**STEPS, "top": {**STEPS["top"], "cache": False}}})
    LocalExecutor(cache=cache).run(per_step, results)
    again = LocalExecutor(cache=cache).run(per_step, results)
    assert hit_ratios(again) == {"words": 1.0, "title_words": 1.0, "top": None}


def test_explain_shows_what_went_into_each_key(cache):
    LocalExecutor(cache=cache).run(spec(), sample_results(2, 3))
    explained = {e["step"]: e for e in cache.explain("cached")}
    assert set(explained) == {"words", "title_words", "top"}
    words = explained["words"]
    assert words["op"] == "analyze.word_count" and words["version"] == "1"
    assert words["identity"] == {"input_column": "text", "output_column": "word_count"}
    assert words["reads"] == ["text"]
    assert words["last_run"] == {"units": 6, "hits": 0}
    assert words["step_key"] == step_key(create("analyze.word_count"))
    assert cache.explain("cached", "top")[0]["identity"] == {"k": 3, "rank_column": "rank"}


def test_a_removed_cache_file_is_a_miss_not_an_error(cache):
    results = sample_results(2, 3)
    LocalExecutor(cache=cache).run(spec(), results)
    for f in (cache.root / "data").glob("*.arrow"):
        f.unlink()
    again = LocalExecutor(cache=cache).run(spec(), results)
    assert again.cache_hit_ratio == 0.0
    assert again.table.num_rows == 6


@pytest.mark.parametrize("k", [1, 4])
def test_query_units_cache_per_query(cache, k):
    op = create("postprocess.reduce", {"k": k}, step_id="top")
    first, _ = StepRunner(op, cache).run(sample_results(2, 5))
    out, stats = StepRunner(op, cache).run(sample_results(3, 5))  # two old queries, one new
    assert (stats.units, stats.hits) == (3, 2)
    assert out.slice(0, first.num_rows).equals(first)
    assert out.num_rows == 3 * k


def test_clear_refuses_a_folder_that_is_not_a_cache_and_deletes_nothing(tmp_path):
    thesis = tmp_path / "thesis"
    thesis.mkdir()
    (thesis / "chapter1.tex").write_text("years of work")
    with pytest.raises(CacheError, match="not a Tessera step cache") as err:
        StepCache(thesis).clear()
    assert err.value.field == "cache_dir" and (thesis / "chapter1.tex").read_text() == "years of work"
    with pytest.raises(CacheError, match="holds other files"):  # nor is one made in it
        LocalExecutor(cache=StepCache(thesis)).run(spec(), sample_results(1, 2))
    assert sorted(p.name for p in thesis.iterdir()) == ["chapter1.tex"]


def test_clear_deletes_only_what_the_cache_wrote_and_never_through_a_link(tmp_path, cache):
    LocalExecutor(cache=cache).run(spec(), sample_results(2, 3))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.arrow").write_text("not the cache's")
    (cache.root / "data" / "link").symlink_to(outside)
    (cache.root / "notes.txt").write_text("mine")
    marker = cache.root / "tessera-cache.json"
    marker.rename(tmp_path / "marker")  # someone's file beside a cache without its marker: refused
    with pytest.raises(CacheError, match="not a Tessera step cache"):
        StepCache(cache.root).clear()
    (tmp_path / "marker").rename(marker)
    assert StepCache(cache.root).clear()
    assert (outside / "keep.arrow").read_text() == "not the cache's"
    # the marker stays with someone's files: the folder was refused by every later run and clear before
    assert sorted(p.name for p in cache.root.iterdir()) == ["data", "notes.txt", "tessera-cache.json"]
    assert [p.name for p in (cache.root / "data").iterdir()] == ["link"]
    assert LocalExecutor(cache=StepCache(cache.root)).run(spec(), sample_results(2, 3)).cache_hit_ratio == 0.0
    assert LocalExecutor(cache=StepCache(cache.root)).run(spec(), sample_results(2, 3)).cache_hit_ratio == 1.0
    assert StepCache(cache.root).clear() and (cache.root / "notes.txt").read_text() == "mine"
    (cache.root / "notes.txt").unlink()  # someone's file in data/ alone: the marker stays too (it went, and the
    (cache.root / "data" / "link").unlink()  # next clear refused the folder as no cache)
    LocalExecutor(cache=StepCache(cache.root)).run(spec(), sample_results(2, 3))
    (cache.root / "data" / "notes.txt").write_text("mine")
    assert StepCache(cache.root).clear() and StepCache(cache.root).clear()
    assert sorted(p.name for p in cache.root.iterdir()) == ["data", "tessera-cache.json"]
    assert [p.name for p in (cache.root / "data").iterdir()] == ["notes.txt"]


def test_a_damaged_cache_file_is_recomputed_and_stored_again(cache):
    results = sample_results(2, 3)
    LocalExecutor(cache=cache).run(spec(), results)
    for f in (cache.root / "data").glob("*.arrow"):
        f.write_bytes(f.read_bytes()[:40])  # truncated
    again = LocalExecutor(cache=cache).run(spec(), results)
    assert again.cache_hit_ratio == 0.0 and again.table.num_rows == 6
    third = LocalExecutor(cache=cache).run(spec(), results)
    assert third.cache_hit_ratio == 1.0 and third.table.equals(again.table)


def test_an_unusable_cache_folder_is_one_error_naming_the_path(tmp_path):
    garbage = tmp_path / "garbage"
    garbage.mkdir()
    (garbage / "index.sqlite").write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(CacheError, match=r"garbage/index.sqlite is not a step cache database"):
        StepCache(garbage).check()
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(CacheError, match="is a file, not a folder"):
        StepCache(a_file).check()


@pytest.mark.parametrize("kind", ["local", pytest.param("ray", marks=[pytest.mark.ray, pytest.mark.slow])])
def test_a_row_steps_query_metadata_comes_back_with_its_cached_rows(cache, kind, request, monkeypatch):
    """Row units store their query's metadata as query units do; a hit brings it back (both executors; the Ray
    one is slow: it starts Ray)."""
    from operators import registry

    registry.all_operators()
    monkeypatch.setitem(registry._registry, RowNotes.name, RowNotes)
    if kind == "ray":
        request.getfixturevalue("ray_session")
        from flows.executors.ray_data import RayDataExecutor as Executor
    else:
        Executor = LocalExecutor
    notes = FlowSpec.parse({"name": "notes", "steps": {"notes": {"op": "test.row_notes"}}})
    table = sample_results(3, 4)
    first = Executor(cache=cache).run(notes, table)
    assert first.metadata == {q: {"notes": {"notes": 4}} for q in ("q1", "q2", "q3")}
    again = Executor(cache=cache).run(notes, table)
    assert again.steps["notes"].hit_ratio == 1.0 and again.metadata == first.metadata
    q1 = table.slice(0, 4)
    mixed = pa.concat_tables([table, q1.set_column(0, "qid", pa.array(["q9"] * 4))])  # q9's rows are new
    more = Executor(cache=cache).run(notes, mixed)
    assert more.steps["notes"].hit_ratio == 0.75
    assert more.metadata["q9"] == {"notes": {"notes": 4}} and more.metadata["q1"] == first.metadata["q1"]
