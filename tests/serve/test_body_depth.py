"""A body that nests deep is a 422 naming where, never a 500: a step's params nested ~500 deep once reached the
interpreter's recursion limit in the index walks (``serve/indices/index_roots.py``) on /task/run and /task/enqueue.
Through the FastAPI app on uvicorn, without Ray (nothing runs: the spec is refused before)."""

from __future__ import annotations

import pytest
import requests


def nested(depth: int) -> str:
    params = '{"filter":' + '{"a":' * depth + "1" + "}" * depth + "}"
    return '{"flow":{"steps":{"b":{"op":"retrieve.bm25","params":' + params + '}}},"query":"x"}'


@pytest.mark.parametrize("route", ["/task/run", "/task/enqueue", "/v1/search"])
@pytest.mark.parametrize("depth", [100, 500, 2000])
def test_params_nested_deep_are_a_422_naming_the_field(base, route, depth):
    answer = requests.post(base + route, data=nested(depth), headers={"Content-Type": "application/json"}, timeout=60)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["param"].startswith(("steps.b.params", "body")), error  # /v1/search reads the filter's type first
    assert route == "/v1/search" or "nested" in error["message"], error


def test_params_of_a_sane_depth_are_not_refused_for_it(base):
    answer = requests.post(base + "/task/run", data=nested(10), headers={"Content-Type": "application/json"},
                           timeout=60)
    assert "nested" not in answer.text, answer.text


def test_the_limit_is_a_spec_files():
    from flows.specfile import MAX_DEPTH
    from serve.http.errors import ApiError
    from serve.indices.index_roots import check_depth

    def params(depth: int) -> dict:
        value: object = 1
        for _ in range(depth):
            value = {"a": value}
        return value

    check_depth(params(MAX_DEPTH), "steps.b.params")
    check_depth([[{"a": []}]], "steps.b.params")
    with pytest.raises(ApiError) as err:
        check_depth(params(MAX_DEPTH + 1), "steps.b.params")
    assert (err.value.status, err.value.param, err.value.code) == (422, "steps.b.params", "params_too_deep")


@pytest.mark.parametrize("depth", [100, 500])
def test_a_saved_flow_nested_deep_is_a_422_and_is_not_saved(base, depth):
    """``PUT /flows`` saved a flow at depth 100 (that then never ran) and gave a 500 at 500 (pydantic could not
    serialise it); an untyped param (``retrieve.chroma``'s ``where``) takes any nesting."""
    where = '{"a":' * depth + "1" + "}" * depth
    spec = '{"steps":{"c":{"op":"retrieve.chroma","params":{"path":"x","collection":"c","where":' + where + '}}}}'
    answer = requests.put(base + "/flows/deep", data=spec, headers={"Content-Type": "application/json"}, timeout=60)
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["param"] == "steps.c.params" and "nested" in answer.json()["error"]["message"]
    assert requests.get(base + "/flows/deep", timeout=60).status_code == 404
