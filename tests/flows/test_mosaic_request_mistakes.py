"""A mosaicRAG request written wrong: a ``name`` that is not text named the flow by its Python repr (``['a']``,
``True``), in its cache entries too; a request without numbered steps was refused as a native spec with an unknown
field ``query``, without a word of the steps it lacks."""

from __future__ import annotations

import pytest

from flows.spec import FlowSpec
from operators.errors import SpecError

STEP = {"id": "retrieve.corpus_bm25", "parameters": {"k": "20"}}


@pytest.mark.parametrize("name, kind", [(["a"], "an array"), ({"a": 1}, "an object"), (True, "true/false")])
def test_a_name_that_is_not_text_is_refused(name, kind):
    with pytest.raises(SpecError) as caught:
        FlowSpec.parse({"query": "bees", "name": name, "1": STEP})
    assert caught.value.field == "name"
    assert caught.value.message == f"must be the flow's name as text, got {kind}"


@pytest.mark.parametrize("name, named", [("mine", "mine"), (7, "7"), (None, "mosaic"), ("", "mosaic")])
def test_a_name_as_text_or_a_number_names_the_flow(name, named):
    assert FlowSpec.parse({"query": "bees", "name": name, "1": STEP}).name == named


def test_a_request_without_numbered_steps_says_it_has_none(tmp_path):
    path = tmp_path / "request.json"
    path.write_text('{"query": "bees", "parameters": {"k": "5"}}')
    with pytest.raises(SpecError) as caught:
        FlowSpec.load(str(path))
    assert caught.value.field == "query"
    assert "'query' is a field of a mosaicRAG request, whose steps are numbered" in caught.value.message
    assert "this one has no step" in caught.value.message


@pytest.mark.parametrize("queries, given", [(["opera singers"], "'opera singers'"),
                                            (["opera", "honey"], "'opera' (and 1 more)")])
def test_queries_given_beside_a_requests_query_are_run_and_the_request_query_replaced_is_said(
        tmp_path, monkeypatch, capsys, caplog, queries, given):
    """``tessera run request.json --queries X`` ran X alone and dropped the request's ``query`` without a word: the
    request's steps run for the queries given (a request reused as a pipeline), and stderr says whose query is not
    run."""
    import json

    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    request = tmp_path / "request.json"
    step = {"id": "analyze.word_count", "parameters": {"input_column": "query"}}  # the query's words: no index
    request.write_text(json.dumps({"query": "honey bees", "1": step}))
    args = ["run", str(request), "--executor", "local", "--no-cache", "--json"]
    assert main([*args, *(f"--queries={q}" for q in queries)]) == 0
    assert [row["query"] for row in json.loads(capsys.readouterr().out)["rows"]] == queries
    notes = [r for r in caplog.records if "replaces the request's own query" in r.getMessage()]
    assert [(r.getMessage(), r.note) for r in notes] == [(f"--queries {given} replaces the request's own query "
                                                          f"'honey bees' ({request}): the request's steps run for "
                                                          "the queries given", True)]  # a note: --quiet hides it
    caplog.clear()
    assert main(args) == 0  # the request's own query, and no note
    assert [row["query"] for row in json.loads(capsys.readouterr().out)["rows"]] == ["honey bees"]
    assert not [r for r in caplog.records if "replaces" in r.getMessage()]
