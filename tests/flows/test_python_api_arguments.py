"""The Python API's arguments as a notebook gets them wrong (or nearly right): ``Flow.load``'s source and index,
``Flow.run``'s cache, ``Index.open``/``Index(path)``, ``ingest``'s source, index and shard_size; and a result that
prints in one line. Each wrong one is a TesseraError naming the argument and what it got, not a TypeError from
deep inside (``os.fspath``, ``<`` between str and int) or a flow looked up by the name 'None'."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from flows.ingestion.errors import IngestError
from operators.errors import SpecError, TesseraError
from operators.store.errors import IndexStoreError
from tests.open_files import open_files


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    return tmp_path


@pytest.fixture
def corpus(tmp_path):
    """Ten of the bundled sample's documents as a JSONL corpus."""
    from operators.testing import sample_documents

    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"_id": d["docno"], "title": d["title"], "text": d["text"]}) + "\n"
                            for d in sample_documents(10).to_pylist()), encoding="utf-8")
    return path


def test_a_result_prints_in_one_line_not_every_step_table(bm25_index, home):
    from flows.api import Flow

    result = Flow.load("bm25", index=bm25_index).run(["honey bees", "opera"])
    shown = repr(result)
    assert shown.startswith(f"FlowResult('bm25': {result.description()}; ") and "steps: bm25" in shown
    assert "columns: qid, query, docno, title, text" in shown
    assert "pyarrow.Table" not in shown and "\n" not in shown and len(shown) < 400


@pytest.mark.parametrize("source, said", [(None, "got NoneType None"), (3, "got int 3")])
def test_a_flow_that_is_not_a_name_text_or_dict_is_refused_naming_source(source, said):
    from flows.api import Flow

    with pytest.raises(SpecError) as err:
        Flow.load(source)
    assert err.value.field == "source" and said in err.value.message
    assert "a flow name, a spec file, YAML or JSON text, a dict, a FlowSpec or a Flow" in err.value.message


def test_an_index_that_is_not_an_index_name_or_path_is_refused_at_load(bm25_index):
    from flows.api import Flow, Index

    with pytest.raises(SpecError) as err:
        Flow.load("bm25", index=3)
    assert err.value.field == "index" and "got int 3" in err.value.message and "Index.open(path)" in err.value.message
    with pytest.raises(SpecError) as err:  # the class, not an index: "must be a string (got <property object ...>)"
        Flow.load("bm25", index=Index)
    assert err.value.field == "index" and "got type <class 'flows.api.flow_and_index.Index'>" in err.value.message


@pytest.mark.parametrize("as_given", [Path, "Index"])
def test_a_dict_specs_index_may_be_a_path_or_an_index_as_index_may(bm25_index, home, as_given):
    """``Flow.load(..., index=)`` takes a ``Path`` and an ``Index``; a dict's ``params.index`` refused both ("must be a
    string"). The spec holds the path's text, and the dict given is left as it was."""
    from flows.api import Flow, Index

    given = Index.open(bm25_index) if as_given == "Index" else as_given(bm25_index)
    spec = {"name": "own", "steps": {"bm25": {"op": "retrieve.bm25", "params": {"index": given, "k": 3}}}}
    flow = Flow.load(spec)
    assert flow.spec.steps["bm25"].params["index"] == str(bm25_index)
    assert spec["steps"]["bm25"]["params"]["index"] is given
    ran = flow.run("opera composers").table
    assert ran.num_rows > 0
    assert ran.equals(Flow.load("bm25", index=str(bm25_index), params={"bm25.k": 3}).run("opera composers").table)


def test_a_relative_path_is_a_path_not_an_index_name(bm25_index, home, monkeypatch):
    """``Path("./idx")`` is ``Path("idx")``: its text, a bare name, was read as ``$TESSERA_HOME``'s index ``idx``."""
    from flows.api import Flow, Index

    monkeypatch.chdir(bm25_index.parent)
    relative = Path(".") / bm25_index.name
    assert Index.open(relative).path == bm25_index
    spec = {"name": "own", "steps": {"bm25": {"op": "retrieve.bm25", "params": {"index": relative}}}}
    assert Flow.load(spec).spec.steps["bm25"].params["index"] == str(bm25_index)
    assert Flow.load("bm25", index=relative).spec.steps["bm25"].params["index"] == str(bm25_index)
    with pytest.raises(IndexStoreError, match="no index at .*/indices/"):  # the text is still a name
        Index.open(bm25_index.name)


def test_a_cache_that_is_not_a_flag_or_folder_is_refused_naming_cache(bm25_index, home):
    from flows.api import Flow

    with pytest.raises(SpecError) as err:
        Flow.load("bm25", index=bm25_index).run("bees", cache=1)
    assert err.value.field == "cache" and "got int 1" in err.value.message
    for meant in ("yes", "False", " on ", ""):  # a text meant as a flag made a folder of that name, here
        with pytest.raises(SpecError) as err:
            Flow.load("bm25", index=bm25_index).run("bees", cache=meant)
        assert err.value.field == "cache" and f"got str {meant!r}" in err.value.message
    assert not (Path.cwd() / "yes").exists()


@pytest.mark.parametrize("call", ["Index", "Index.open"])
@pytest.mark.parametrize("path", [None, 3])
def test_index_and_index_open_refuse_what_is_no_index_with_one_error(call, path):
    """``Index(None)`` was a SpecError and ``Index.open(None)`` an IndexStoreError (before, ``Index(None)`` was a bare
    AttributeError at the first search): a notebook catching one missed the other. One class, either's except-clause
    catches it from either call."""
    from flows.api import Index
    from operators.store.errors import IndexArgumentError

    with pytest.raises(IndexArgumentError) as err:
        Index(path) if call == "Index" else Index.open(path)
    assert isinstance(err.value, SpecError) and isinstance(err.value, IndexStoreError)
    assert err.value.field == "path"  # it named no argument
    assert err.value.message == (f"{call} takes an index's folder (a path) or name, or an open Index; got "
                                 f"{type(path).__name__} {path}")


def test_index_of_a_path_opens_it(bm25_index):
    from flows.api import Index

    assert len(Index(bm25_index)) == len(Index.open(bm25_index)) > 0
    assert Index(str(bm25_index)).path == bm25_index
    again = Index(Index.open(bm25_index))  # an open index: the same one (its first search failed before)
    hits = again.search("opera composers", k=2, method="bm25")
    assert again.path == bm25_index and hits.num_rows == 2
    assert hits.equals(Index.open(bm25_index).search("opera composers", k=2, method="bm25"))
    assert Index.open(again).store is again.store  # as Index(index): an IndexStoreError before


@pytest.mark.parametrize("options, said", [
    ({"method": ["bm25"]}, "unknown method ['bm25']"),  # a bare TypeError (unhashable list) before
    ({"k": 10**6}, "k must be a whole number from 1 to 10,000"),  # the bm25 step's params.k before
])
def test_search_arguments_out_of_reach_are_refused_naming_them(bm25_index, options, said):
    from flows.api import Index

    with pytest.raises(SpecError, match=re.escape(said)) as refused:
        Index.open(bm25_index).search("opera", **options)
    assert refused.value.field == next(iter(options))


@pytest.mark.parametrize("options, field, said", [
    ({"shard_size": "10"}, "shard_size", "shard_size must be a whole number, got str '10'"),
    ({"shard_size": True}, "shard_size", "got bool True"),
    ({"index": None}, "index", "an index is a name or a path (str or pathlib.Path), got NoneType None"),
    ({"chunk": "yes"}, "chunk", "False for none, or None (or True) for the spec's chunk step; got str 'yes'"),
    ({"source": ["corpus.jsonl"]}, "source", "item 1 of 1 is str 'corpus.jsonl' (a file, a glob or a folder is one str "
                                               "or pathlib.Path)"),
])
def test_ingest_refuses_arguments_of_the_wrong_type_naming_them(corpus, home, options, field, said):
    from flows.api import ingest

    arguments = {"source": corpus, "index": home / "idx", **options}
    with pytest.raises(IngestError) as err:
        ingest(arguments.pop("source"), arguments.pop("index"), settings={"dense": False}, progress=False, **arguments)
    assert err.value.field == field and said in err.value.message
    assert not (home / "idx").exists()


def test_ingest_adds_to_an_open_index_and_takes_a_numpy_shard_size(corpus, home, tmp_path):
    from flows.api import ingest

    index = ingest(corpus, home / "idx", settings={"dense": False}, progress=False, shard_size=np.int64(4))
    assert index.report.shards_written == 3
    more = tmp_path / "more.jsonl"
    more.write_text(json.dumps({"_id": "extra1", "title": "Bees", "text": "Honey bees make honey."}) + "\n")
    grown = ingest(more, index, settings={"dense": False}, progress=False)
    assert grown.path == index.path and len(grown) == len(index) and grown.report.docs == 1
    assert "extra1#0" in grown.search("honey bees", k=3, method="bm25").column("docno").to_pylist()


@pytest.mark.parametrize("options, field, said", [
    ({"progress": True}, "progress", "progress is a function called with each ProgressEvent (flows.progress); got"),
    ({"cancel": True}, "cancel", "cancel is a flows.progress.CancelToken; got bool True"),
    ({"keep_history": "no"}, "keep_history", "keep_history is True or False; got str 'no'"),  # kept as true
])
def test_a_progress_or_cancel_that_is_not_one_is_refused_before_any_step_runs(bm25_index, home, options, field,
                                                                               said):
    from flows.api import Flow

    with pytest.raises(SpecError) as err:
        Flow.load("bm25", index=bm25_index).run("honey bees", **options)
    assert err.value.field == field and said in err.value.message


def test_flow_of_a_name_says_to_load_it_and_load_takes_a_flow_for_another_index(bm25_index, home, corpus):
    from flows.api import Flow, ingest

    with pytest.raises(SpecError, match=r"Flow\(spec\) takes a FlowSpec; got str 'bm25': Flow.load\(NAME, index"):
        Flow("bm25")
    first = Flow.load("bm25", index=bm25_index)
    other = ingest(corpus, home / "other", settings={"dense": False}, progress=False)
    again = Flow.load(first, index=other)
    assert again.spec.steps["bm25"].params["index"] == str(other.path) != first.spec.steps["bm25"].params["index"]
    ours = {json.loads(line)["_id"] for line in corpus.read_text().splitlines()}
    found = set(again.run(["classical music", "action film"]).table.column("doc_id").to_pylist())
    assert found and found <= ours


@pytest.mark.parametrize("typo, meant", [("shardsize", "shard_size"), ("setings", "settings"), ("chunks", "chunk")])
def test_a_misspelt_ingest_argument_says_which_was_meant(corpus, home, typo, meant):
    from flows.api import ingest

    with pytest.raises(TypeError, match=f"unexpected keyword argument '{typo}'; did you mean '{meant}'"
                                        r"\? \(arguments: chunk, colbert, ") as err:
        ingest(corpus, home / "idx", **{typo: 10})
    assert isinstance(err.value, TesseraError) and err.value.field == typo  # and a TesseraError, as the others
    assert not (home / "idx").exists()


@pytest.mark.parametrize("call, typo, meant", [
    ("Flow.run", "keephistory", "keep_history"), ("Flow.run", "executer", "executor"),
    ("Flow.load", "indx", "index"), ("Index.search", "methd", "method"), ("Index.search", "top_k", "k"),
    ("Index.search", "query", "queries"), ("Flow.run", "query", "queries"),  # one number for the other: no hint
    ("Index.search", "filters", "filter"),
])
def test_a_misspelt_keyword_of_run_load_or_search_says_which_was_meant(bm25_index, call, typo, meant):
    from flows.api import Flow, Index

    flow, index = Flow.load("bm25", index=bm25_index), Index.open(bm25_index)
    calls = {"Flow.run": lambda **kw: flow.run("classical music", **kw),
             "Flow.load": lambda **kw: Flow.load("bm25", **kw),
             "Index.search": lambda **kw: index.search("classical music", **kw)}
    with pytest.raises(TypeError, match=rf"^field '{typo}': {call}\(\) got an unexpected keyword argument "
                                        rf"'{typo}'; did you mean '{meant}'\? \(arguments: ") as err:
        calls[call](**{typo: False if typo == "keephistory" else "bm25"})
    assert isinstance(err.value, TesseraError) and err.value.field == typo
    assert flow.run("classical music", keep_history=False).table.num_rows > 0  # the right name still runs


def test_a_steps_param_or_the_index_given_to_run_says_where_it_goes(bm25_index):
    """``flow.run(q, k=5)`` (as ``index.search`` takes ``k``) and ``flow.run(q, index=...)`` listed run's arguments
    alone."""
    from flows.api import Flow

    flow = Flow.load("bm25", index=bm25_index)
    with pytest.raises(TypeError) as err:
        flow.run("classical music", k=5)
    assert str(err.value).endswith("; k is a param of step(s) bm25: Flow.load(..., params={'bm25.k': ...}) sets a "
                                   "step's, as tessera run --set bm25.k=... does")
    with pytest.raises(TypeError) as err:
        flow.run("classical music", index=bm25_index)
    assert str(err.value).endswith("; the index is Flow.load's: Flow.load(flow, index=...) gives this flow another")
    with pytest.raises(TypeError) as err:  # a class method's keyword: no flow to ask, but where such a one goes
        Flow.load("bm25", k=5)
    assert str(err.value).endswith("(arguments: index, params, source); a step's param is set by params={'STEP.k': "
                                   "...}, as tessera run --set STEP.k=... does")
    with pytest.raises(TypeError) as err:
        Flow.load("bm25", executor="ray")
    assert str(err.value).endswith("; executor is Flow.run's: Flow.load(...).run(queries, executor=...)")
    with pytest.raises(TypeError) as err:  # a misspelt argument of its own: said so, and nothing more
        Flow.load("bm25", indx=bm25_index)
    assert str(err.value).endswith("; did you mean 'index'? (arguments: index, params, source)")


def test_a_dict_of_qid_to_text_is_queries_as_beir_loads_them(bm25_index, home):
    from flows.api import Flow

    flow = Flow.load("bm25", index=bm25_index)
    texts = {"q7": "classical music", "q12": "action film"}
    as_table = flow.run(pa.table({"qid": list(texts), "query": list(texts.values())})).table
    assert as_table.num_rows > 0 and flow.run(texts).table.equals(as_table)
    assert flow.run({"qid": list(texts), "query": list(texts.values())}).table.equals(as_table)  # a dict of columns
    assert flow.run({7: "classical music"}).table.column("qid").to_pylist()[0] == "7"
    import pandas as pd

    series = pd.DataFrame({"_id": list(texts), "text": list(texts.values())}).set_index("_id")["text"]
    assert flow.run(series).table.equals(as_table)  # a Series is {qid: text} by its index: numbered 1, 2 before
    assert flow.run(pd.Series(list(texts.values()))).table.equals(flow.run(list(texts.values())).table)


@pytest.mark.parametrize("given, said", [
    ({"q1": 3}, "a dict of queries maps each qid to its text; qid 'q1' has int 3"),
    ({"qid": ["a"], "text": ["bees"]}, "a dict of columns needs keys qid and query, got ['qid', 'text']"),
    ({"qid": "1", "query": "bees"}, "a dict with keys qid and query is read as a table's columns, so each is a list"),
    ({1: "bees", "b": "opera"}, "a dict of queries has qids of mixed types: [1, 'b']"),
    ({"q1": ""}, "is empty: give the text to search for"),
    ({"qid": ["a", "b"], "query": ["bees", 3]},  # pyarrow's "Expected bytes, got a 'int' object" named no column
     "column query of the queries mixes types: row 1 of 2 is 'bees' (str), row 2 is 3 (int)"),
])
def test_a_dict_that_is_not_queries_is_refused_saying_what_a_dict_of_queries_is(bm25_index, home, given, said):
    from flows.api import Flow

    with pytest.raises(SpecError) as err:
        Flow.load("bm25", index=bm25_index).run(given)
    assert err.value.field.startswith("queries") and said in err.value.message


def test_helpers_given_another_kind_of_argument_name_it(bm25_index, tmp_path):
    """Bare TypeErrors and AttributeErrors before, and check_columns read "qid" as the columns q, i and d."""
    from flows.api import Flow
    from flows.queries import read_queries, write_results

    result = Flow.load("bm25", index=str(bm25_index)).run("opera", keep_history=False)
    with pytest.raises(SpecError, match="write_results writes a pyarrow Table, got FlowResult: give its .table"):
        write_results(result, tmp_path / "out.jsonl")
    assert write_results(result.table, tmp_path / "out.jsonl").is_file()
    for given in (None, ["a"]):
        with pytest.raises(SpecError, match="queries are a file, '-' .* or a query's text, got"):
            read_queries(given)
    with pytest.raises(SpecError, match=r"input_columns is a collection of column names, not the text 'qid'"):
        Flow.load("bm25", index=str(bm25_index)).check_columns("qid")
    (tmp_path / "plugin").mkdir()
    with pytest.raises(SpecError, match="is a folder, not a spec file"):
        Flow.load(str(tmp_path / "plugin"))


def test_pandas_queries_categorical_or_empty_are_read(bm25_index):
    """pandas writes a categorical column as dictionary<large_string> and an empty one as float64: both refused."""
    import pandas as pd

    from flows.api import Flow

    flow = Flow.load("bm25", index=str(bm25_index))
    queries = pd.DataFrame({"qid": ["1", "2"], "query": pd.Categorical(["opera", "symphony"])})
    assert set(flow.run(queries, keep_history=False).table.column("qid").to_pylist()) == {"1", "2"}
    assert flow.run(pd.DataFrame({"qid": [], "query": []}), keep_history=False).table.num_rows == 0


@pytest.mark.parametrize("columns, field, said", [
    ({"qid": ["a", "b"], "query": ["bees", 3]}, "queries.query",
     "column query of the queries mixes types: row 1 of 2 is 'bees' (str), row 2 is 3 (int); each query is the text"),
    ({"qid": ["a", 2], "query": ["bees", "opera"]}, "queries.qid",
     "column qid of the queries mixes types: row 1 of 2 is 'a' (str), row 2 is 2 (int)"),
    ({"qid": ["a", "b"], "query": ["bees", "opera"], "tag": ["x", ["y"]]}, "queries.tag",
     "column tag of the queries mixes types: row 1 of 2 is 'x' (str), row 2 is ['y'] (list)"),
])
def test_a_dataframe_column_of_mixed_types_is_refused_naming_column_and_row(bm25_index, columns, field, said):
    """An object column with text and a number was pyarrow's ArrowTypeError from Table.from_pandas, a traceback
    naming neither the row nor the value."""
    import pandas as pd

    from flows.api import Flow

    with pytest.raises(SpecError) as err:
        Flow.load("bm25", index=str(bm25_index)).run(pd.DataFrame(columns))
    assert err.value.field == field and said in err.value.message


def open_cache_files(under) -> list[str]:
    """The step-cache databases under ``under`` this process holds open (``index.sqlite`` and its ``-wal``/``-shm``)."""
    return [held for held in open_files(under) if "index.sqlite" in held]


def test_runs_with_a_cache_folder_each_keep_a_few_databases_open_and_none_deleted(bm25_index, tmp_path):
    """A program that gives each run a folder of its own (a temporary one, deleted after) held each folder's
    database open for good: three files per run, the deleted ones' disk space with them, until the process ran out
    of descriptors."""
    from flows.api import KEPT_CACHES, Flow

    flow = Flow.load("bm25", index=bm25_index)
    before = len(open_cache_files(tmp_path))
    for run in range(KEPT_CACHES + 4):
        with tempfile.TemporaryDirectory(dir=tmp_path) as folder:
            assert flow.run("gothic cathedrals", cache=folder).table.num_rows
    for run in range(KEPT_CACHES + 4):  # folders kept on disk: the last ones used stay open, no more
        assert flow.run("gothic cathedrals", cache=tmp_path / f"kept{run}").table.num_rows
        deleted = [held for held in open_cache_files(tmp_path) if held.endswith("(deleted)")]
        assert deleted == []  # each let go at the next run
    assert len(open_cache_files(tmp_path)) - before <= 3 * KEPT_CACHES
    again = flow.run("gothic cathedrals", cache=tmp_path / f"kept{KEPT_CACHES + 3}")  # the last: still kept
    assert again.steps["bm25"].hits == 1


@pytest.mark.parametrize("steps, said", [
    ({"words": {"op": "analyze.word_count", "params": {"input_column": "query"}}},
     "flow 'f' reads no index; drop index="),
    ({"bm25": {"op": "retrieve.bm25", "params": {"index": "/elsewhere/idx"}}}, "flow 'f' names its own index (step "
     "'bm25' searches '/elsewhere/idx'); drop index="),
])
def test_an_index_no_step_would_search_is_refused_as_the_clis_index_is(bm25_index, steps, said):
    """``Flow.load(spec, index=...)`` dropped it without a word: the run searched the spec's own index, or none, where
    ``tessera run --index`` is refused."""
    from flows.api import Flow

    with pytest.raises(SpecError) as err:
        Flow.load({"name": "f", "steps": steps}, index=str(bm25_index))
    assert err.value.field == "index"
    assert err.value.message.startswith(f"index={str(bm25_index)!r} would not be used: {said}"), err.value.message
    missing = bm25_index.parent / "no-such-index"  # said "no index at ...: build one", for an index never read
    with pytest.raises(SpecError) as err:
        Flow.load({"name": "f", "steps": steps}, index=str(missing))
    assert err.value.field == "index"
    assert err.value.message.startswith(f"index={str(missing)!r} would not be used: {said}"), err.value.message
