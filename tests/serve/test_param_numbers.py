"""A step's params from the network hold finite numbers and integers JSON carries exactly, else a 422 naming the
field: ``2**70`` reached C code as an ``OverflowError`` (a 500), and a ``NaN`` cutoff (Python's JSON reader takes
``NaN`` and ``Infinity``) dropped every hit without a word. Through the FastAPI app on uvicorn, without Ray."""

from __future__ import annotations

import pytest
import requests

JSON = {"Content-Type": "application/json"}


def search(op: str, params: str) -> str:
    return ('{"query":"bees","index":"notes","flow":{"steps":{"bm25":{"op":"retrieve.bm25","params":{"k":5}},'
            '"c":{"op":"' + op + '","params":' + params + ',"inputs":["bm25"]}}}}')


@pytest.mark.parametrize("op, params, field", [
    ("preprocess.chunk", '{"size": 1180591620717411303424}', "steps.c.params.size"),
    ("rerank.tfidf", '{"n": 9007199254740992}', "steps.c.params.n"),
    ("postprocess.cutoff", '{"similarity_cutoff": NaN}', "steps.c.params.similarity_cutoff"),
    ("fuse.rrf", '{"k": Infinity}', "steps.c.params.k"),
    ("rerank.tfidf", '{"n": NaN}', "steps.c.params.n"),  # an integer param: pydantic's invalid_spec before
])
def test_a_number_json_does_not_carry_is_a_422_naming_its_field(notes_api, op, params, field):
    answer = requests.post(notes_api + "/v1/search", data=search(op, params), headers=JSON, timeout=60)
    assert answer.status_code == 422, answer.text
    assert (answer.json()["error"]["param"], answer.json()["error"]["code"]) == (field, "number_out_of_range")


def test_the_largest_exact_integer_runs(notes_api):
    answer = requests.post(notes_api + "/v1/search", data=search("preprocess.chunk", '{"size": 9007199254740991}'),
                           headers=JSON, timeout=60)
    assert answer.status_code == 200, answer.text
    assert [hit["doc_id"] for hit in answer.json()["results"][0]["hits"]] == ["bees#0"]


def test_a_saved_flow_with_infinity_is_a_422_and_is_not_saved(notes_api):
    spec = '{"steps":{"b":{"op":"retrieve.bm25","params":{"k":5}},"f":{"op":"fuse.rrf","params":{"k":-Infinity}}}}'
    answer = requests.put(notes_api + "/flows/endless", data=spec, headers=JSON, timeout=60)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["param"] == "steps.f.params.k"
    assert requests.get(notes_api + "/flows/endless", timeout=60).status_code == 404


@pytest.mark.parametrize("query, field", [(f"offset={2**53}", "offset"), (f"offset={10**30}", "offset"),
                                          (f"limit={2**53}", "limit")])
def test_a_documents_listing_beyond_the_exact_integers_is_a_422_naming_the_field(notes_api, query, field):
    """An offset of 2**70 was accepted and echoed back, a number no JSON reader need take as sent."""
    answer = requests.get(f"{notes_api}/v1/indices/notes/documents?{query}", timeout=60)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["param"] == field
    last = requests.get(f"{notes_api}/v1/indices/notes/documents?offset={2**53 - 1}", timeout=60)
    assert (last.status_code, last.json()["offset"], last.json()["documents"]) == (200, 2**53 - 1, [])
