"""Filters valid in form that the index's shards cannot evaluate as Arrow first would: a month on a text column
(a title, a date string beside values that spell no date), ``country``/``region`` on a list column or on bytes
that are no UTF-8, an integer too large for int64 on a column of doubles, a number on a column whose shards hold
integers and doubles, a filter on an index without documents. Each is either a plain answer (no hits where nothing
can match) or a 422 ``flow_not_runnable`` naming the filter's condition as written (never Arrow's compiled
expression), never a 500, also where one shard of several fails (its rows were silently lost to a pre-filter) or
lacks the column (null in its rows, as after retrieval): pre and post filtering, ``postprocess.filter``, a flow of
two retrievers, over HTTP and in ``tessera run``. Real BM25 indices and a real SQLite task store, through
``Service`` and the search route's functions; no Ray."""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pytest

from serve.http.errors import ApiError
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve
from tests.serve.conftest import api_on_localhost, run_search
from tests.text_checks import TRACEBACK


#: How the failing pre-filter on the undecodable ``region`` is named: the condition as written, the value's type,
#: the column's and the problem.
UTF8 = ("filter {region: 'EU'} (text) cannot be evaluated on column 'region' of type binary: some of its values are "
        "bytes that are not valid UTF-8 text")
#: Arrow's compiled expression (``is_in(utf8_lower(cast(region, {to_type=string, ...``), never shown to a user.
ARROW_EXPRESSION = re.compile(r"is_in\(|utf8_lower|cast\(|to_type=|value_set=|null_matching")


def build_indices(home) -> None:
    """``news``: two shards (the second brings ``when``, date strings and one that is no date, a float ``year``,
    and ``views`` as doubles, int64 beyond 2**24 in the first); ``lists`` with ``country`` as a list column and
    ``region`` as bytes, one of them no UTF-8; ``empty``: an index made with no documents yet."""
    from operators.store import Index, IndexSettings

    news = Index.create(home / "indices" / "news", IndexSettings(dense=False))
    news.add(pa.table({"docno": ["bees#0", "ants#0"], "doc_id": ["bees", "ants"], "title": ["Bees", "Ants"],
                       "text": ["honey bees make honey from nectar", "ants farm aphids for honeydew"],
                       "year": pa.array([2024, 2020], pa.int64()), "views": pa.array([2 ** 30, 3], pa.int64())}))
    news.add(pa.table({"docno": ["wasp#0", "moth#0"], "doc_id": ["wasp", "moth"], "title": ["Wasp", "Moth"],
                       "text": ["wasps steal honey", "moths like honey at night"],
                       "when": ["2021-03-04", "spring 2021"], "year": pa.array([2021.5, 2019.0]),
                       "views": pa.array([2.5, 2.0 ** 40])}))
    lists = Index.create(home / "indices" / "lists", IndexSettings(dense=False))
    lists.add(pa.table({"docno": ["bees#0", "ants#0"], "doc_id": ["bees", "ants"], "title": ["Bees", "Ants"],
                        "text": ["honey bees make honey from nectar", "ants farm aphids for honey"],
                        "country": pa.array([["FR"], ["DE"]]),
                        "region": pa.array([b"\xff\xfe", b"EU"], pa.binary())}))
    Index.create(home / "indices" / "empty", IndexSettings(dense=False))


def build_mixed(home) -> None:
    """``mixed``: two shards whose ``region`` is text in the first and bytes in the second (one of them no UTF-8;
    the index's column is binary, the types' merge), ``when`` (date strings) in the second alone, and ``draft``
    null in every row of both (of type null)."""
    from operators.store import Index, IndexSettings

    mixed = Index.create(home / "indices" / "mixed", IndexSettings(dense=False))
    mixed.add(pa.table({"docno": ["bees#0", "ants#0"], "doc_id": ["bees", "ants"], "title": ["Bees", "Ants"],
                        "text": ["honey bees make honey from nectar", "ants farm aphids for honey"],
                        "region": ["EU", "US"], "draft": pa.nulls(2)}))
    mixed.add(pa.table({"docno": ["wasp#0", "moth#0"], "doc_id": ["wasp", "moth"], "title": ["Wasp", "Moth"],
                        "text": ["wasps steal honey", "moths like honey at night"],
                        "region": pa.array([b"\xff\xfe", b"EU"], pa.binary()), "when": ["2021-03-04", "2020-07-01"],
                        "draft": pa.nulls(2)}))


@pytest.fixture
def service(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("TESSERA_HOME", str(home))
    build_indices(home)
    args = ServiceArgs(default_index=str(home / "indices" / "news"), task_store=f"sqlite:///{tmp_path / 'tasks.db'}")
    return Service(resolve(args, environ={}), [], "tessera")


@pytest.fixture
def mixed(service, tmp_path):
    """The service, with the ``mixed`` index beside the others (built only for the tests that search it)."""
    build_mixed(tmp_path / "home")
    return service


def bm25(flt: dict, mode: str = "pre") -> dict:
    return {"b": {"op": "retrieve.bm25", "params": {"k": 5, "filter": flt, "filter_mode": mode}}}


def after(flt: dict) -> dict:
    return {"b": {"op": "retrieve.bm25", "params": {"k": 5}},
            "f": {"op": "postprocess.filter", "params": {"filter": flt}}}


def hits(steps: dict, index: str = "news") -> list[str]:
    answer = run_search({"flow": {"steps": steps}, "query": "honey", "index": index}, "local")
    return [hit["docno"] for hit in answer["results"][0]["hits"]]


@pytest.mark.parametrize("mode", ["pre", "post"])
def test_a_month_on_text_that_spells_no_date_matches_nothing(service, mode):
    assert hits(bm25({"field": "title", "month": 3}, mode)) == []
    # 'spring 2021' is no date: its row does not match, and the date beside it still does
    assert hits(bm25({"field": "when", "month": 3}, mode)) == ["wasp#0"]
    assert hits(bm25({"not": {"field": "when", "month": 3}}, mode)) == []


def test_a_month_on_text_after_retrieval_matches_nothing(service):
    assert hits(after({"field": "title", "month": 3})) == []
    assert hits(after({"field": "when", "month": 3})) == ["wasp#0"]


@pytest.mark.parametrize("steps, index, param, says", [
    (bm25({"country": "FR"}), "lists", "steps.b.params.filter.country", "column 'country' is list"),
    (bm25({"country": "FR"}, "post"), "lists", "steps.b.params.filter.country", "column 'country' is list"),
    (after({"country": ["FR", "DE"]}), "lists", "steps.f.params.filter.country", "column 'country' is list"),
    (bm25({"region": "EU"}), "lists", "steps.b.params.filter", UTF8),
    (bm25({"region": "EU"}, "post"), "lists", "steps.b.params.filter", UTF8),
    (after({"region": "EU"}), "lists", "steps.f.params.filter", UTF8),
    (bm25({"any": [{"field": "title", "eq": "Bees"}, {"region": ["EU", "US"]}]}), "lists", "steps.b.params.filter",
     "filter {region: ['EU', 'US']} (a list of text) cannot be evaluated on column 'region' of type binary"),
    (bm25({"field": "year", "eq": True}), "news", "steps.b.params.filter",
     "filter {field: year, eq: true}: value true does not fit column 'year' of type double (a boolean"),
    (bm25({"field": "year", "in": [2024, "x"]}, "post"), "news", "steps.b.params.filter",
     "filter {field: year, in: [2024, 'x']}: value 'x' does not fit column 'year' of type double (text"),
    ({"a": {"op": "retrieve.bm25", "params": {"k": 5, "filter": {"field": "title", "ne": "Ants"}}},
      "b": {"op": "retrieve.bm25", "params": {"k": 5, "filter": {"country": "FR"}}, "inputs": []},
      "fused": {"op": "fuse.rrf", "inputs": ["a", "b"]}}, "lists", "steps.b.params.filter.country", "column 'country'"),
])
def test_a_filter_no_shard_can_evaluate_is_a_422_naming_it(service, steps, index, param, says):
    with pytest.raises(ApiError) as err:
        hits(steps, index)
    assert (err.value.status, err.value.code, err.value.param) == (422, "flow_not_runnable", param), err.value.message
    assert says in err.value.message and not ARROW_EXPRESSION.search(err.value.message), err.value.message


def test_a_filter_that_fails_on_one_shard_is_a_422_not_that_shards_rows_lost(mixed):
    """``region`` reads as text in the first shard and fails on the second's bytes: a pre-filter matched the first
    shard's EU alone (the second's EU silently lost, as if it lacked the column), never an error."""
    for steps in (bm25({"region": "EU"}), bm25({"region": "EU"}, "post"), after({"region": "EU"})):
        with pytest.raises(ApiError) as err:
            hits(steps, "mixed")
        assert (err.value.status, err.value.code, err.value.param[-13:]) == (422, "flow_not_runnable", "params.filter")
        assert err.value.param == f"steps.{list(steps)[-1]}.params.filter"
        assert UTF8 in err.value.message and not ARROW_EXPRESSION.search(err.value.message), err.value.message


def test_a_column_a_shard_lacks_is_null_in_its_rows_in_every_mode(mixed):
    """The first shard has no ``when``: its rows are null there, so Bees still matches the other branch of the
    ``any`` (a pre-filter dropped the whole shard, and Bees with it, while post-filtering kept it)."""
    either = {"any": [{"field": "when", "month": 3}, {"field": "title", "eq": "Bees"}]}
    for steps in (bm25(either), bm25(either, "post"), after(either)):
        assert sorted(hits(steps, "mixed")) == ["bees#0", "wasp#0"], steps
    assert hits(bm25({"field": "region", "eq": "EU"}), "mixed") == ["bees#0", "moth#0"]  # bytes compare as bytes


def test_a_column_null_in_every_shard_matches_nothing_whatever_the_value(mixed):
    """As ``eq: 5`` there: a null matches no condition. 10**30 was a 422 quoting Python's overflow ('int too large
    to convert to C long'), ``in: [5]`` a 500 (Arrow: 'Invalid null value'), ``year`` a 422."""
    assert hits(bm25({"field": "draft", "eq": 5}), "mixed") == []
    for flt in ({"field": "draft", "eq": 10 ** 30}, {"field": "draft", "gte": -10 ** 30},
                {"field": "draft", "in": [5, 10 ** 30]}, {"field": "draft", "not_in": [5]},
                {"field": "draft", "year": 2020}, {"not": {"field": "draft", "lt": 10 ** 30}}):
        for steps in (bm25(flt), bm25(flt, "post"), after(flt)):
            assert hits(steps, "mixed") == [], steps
        either = {"any": [flt, {"field": "title", "eq": "Bees"}]}
        for steps in (bm25(either), bm25(either, "post"), after(either)):
            assert hits(steps, "mixed") == ["bees#0"], steps


@pytest.mark.parametrize("mode", ["pre", "post"])
def test_an_integer_too_large_for_int64_compares_as_a_double_on_a_float_column(service, mode):
    """``year`` is double (int64 in the first shard, merged with the second's doubles): 10**30 fits a double."""
    assert hits(bm25({"field": "year", "eq": 10 ** 30}, mode)) == []
    # every hit of "honey" (the ants' "honeydew" is none)
    assert sorted(hits(bm25({"field": "year", "lt": 10 ** 30}, mode))) == ["bees#0", "moth#0", "wasp#0"]
    assert hits(bm25({"field": "year", "in": [2024, -10 ** 30]}, mode)) == ["bees#0"]
    assert sorted(hits(bm25({"field": "year", "not_in": [2024, 10 ** 30]}, mode))) == ["moth#0", "wasp#0"]
    assert hits(after({"field": "year", "gte": 10 ** 30})) == []


@pytest.mark.parametrize("mode", ["pre", "post"])
def test_a_number_on_a_column_whose_shards_hold_integers_and_doubles_finds_both(service, mode):
    """``views`` is int64 (2**30) in the first shard and double in the second: compared as doubles in each, the
    first shard's rows are not lost to Arrow's exact-cast check (they were, silently, in a pre-filter)."""
    assert sorted(hits(bm25({"field": "views", "gte": 2.5}, mode))) == ["bees#0", "moth#0", "wasp#0"]
    assert hits(bm25({"field": "views", "in": [2 ** 30, 7.5]}, mode)) == ["bees#0"]
    assert sorted(hits(bm25({"field": "views", "lt": 2 ** 35}, mode))) == ["bees#0", "wasp#0"]


@pytest.mark.parametrize("flt", [{"field": "year", "eq": 2024}, {"field": "nope", "month": 3}, {"country": "FR"}])
@pytest.mark.parametrize("mode", ["pre", "post"])
def test_a_filter_on_an_index_without_documents_finds_nothing(service, flt, mode):
    """As the same search without a filter does: an empty index has no columns yet to refuse a filter by."""
    assert hits({"b": {"op": "retrieve.bm25", "params": {"k": 5}}}, "empty") == []
    assert hits(bm25(flt, mode), "empty") == []


def test_over_http_a_422_and_a_200_not_a_500(mixed):
    import requests


    def search(flt: dict, index: str) -> requests.Response:
        return requests.post(f"{base}/v1/search", json={"flow": {"steps": bm25(flt)}, "query": "honey",
                                                        "index": index}, timeout=60)

    with api_on_localhost() as base:
        refused = search({"country": "FR"}, "lists")
        undecodable = search({"region": "EU"}, "lists")
        no_dates = search({"field": "title", "month": 3}, "news")
        empty = search({"field": "year", "eq": 2024}, "empty")
        huge = search({"field": "year", "lt": 10 ** 30}, "news")
        one_shard_fails = search({"region": "EU"}, "mixed")
        null_column = [search(flt, "mixed") for flt in ({"field": "draft", "eq": 10 ** 30}, {"field": "draft",
                                                                                          "in": [5]})]
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert (error["code"], error["param"]) == ("flow_not_runnable", "steps.b.params.filter.country")
    assert undecodable.status_code == 422, undecodable.text
    error = undecodable.json()["error"]
    assert (error["code"], error["param"]) == ("flow_not_runnable", "steps.b.params.filter")
    assert UTF8 in error["message"] and not ARROW_EXPRESSION.search(error["message"]), error["message"]
    assert huge.status_code == 200 and len(huge.json()["results"][0]["hits"]) == 3, huge.text
    assert one_shard_fails.status_code == 422, one_shard_fails.text
    error = one_shard_fails.json()["error"]
    assert (error["code"], error["param"]) == ("flow_not_runnable", "steps.b.params.filter")
    assert UTF8 in error["message"]
    for answer in null_column:
        assert answer.status_code == 200 and answer.json()["results"][0]["hits"] == [], answer.text
    assert no_dates.status_code == 200 and no_dates.json()["results"][0]["hits"] == [], no_dates.text
    assert empty.status_code == 200 and empty.json()["results"][0]["hits"] == [], empty.text


@pytest.mark.parametrize("index", ["lists", "mixed"])  # mixed: the filter fails on one shard of two
def test_tessera_run_says_it_in_one_line_naming_the_filter(mixed, tmp_path, capsys, index):
    from flows.commands import main

    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"steps": bm25({"region": "EU"})}))
    capsys.readouterr()
    status = main(["run", str(spec), "--index", index, "-q", "honey", "--no-cache", "--quiet"])
    err = capsys.readouterr().err
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert "field 'params.filter'" in err and UTF8 in err and TRACEBACK not in err, err
    assert not ARROW_EXPRESSION.search(err), err
