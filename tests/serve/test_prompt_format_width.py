"""A language model step's ``prompt`` that a client sends is a ``str.format`` template, and a format spec's width was
unbounded: ``{query:>300000000}`` made a 300 MB string as the spec was checked, then a 300 MB prompt each call, so
one request took the memory (and the model's time) of the process running it, the ingress for a search. Such a spec
is now a 422 naming the field, over real HTTP (the service's app under uvicorn on 127.0.0.1), when a flow is saved or
searched with, before anything is formatted."""

from __future__ import annotations

import pytest
import requests

pytestmark = pytest.mark.integration  # the service's app in this process

WIDE = "{query:>20000000}"  # 20 MB of padding: refused at any size over the limit, kept small for the old code


def flow(prompt: str) -> dict:
    return {"steps": {"x": {"op": "query.expand", "params": {"prompt": prompt}},
                      "bm25": {"op": "retrieve.bm25", "params": {"k": 3}}}}


@pytest.mark.parametrize("prompt", [WIDE, "{query:>{count}}", "{count:.20000000f} {query}"])
def test_a_prompt_whose_format_spec_pads_without_bound_is_a_422_naming_it(base, prompt):
    saved = requests.put(f"{base}/flows/wide", json=flow(prompt), timeout=60)
    assert saved.status_code == 422, saved.status_code
    error = saved.json()["error"]
    assert error["param"] == "steps.x.params.prompt" and "the prompt's field" in error["message"], error
    searched = requests.post(f"{base}/v1/search", json={"flow": flow(prompt), "query": "bees"}, timeout=60)
    assert searched.status_code == 422 and searched.json()["error"]["param"] == "steps.x.params.prompt"
    assert requests.get(f"{base}/flows/wide", timeout=60).status_code == 404


def test_a_prompt_with_a_small_format_spec_is_saved(base):
    assert requests.put(f"{base}/flows/padded", json=flow("{instruction}\n{query:>40} ({count:2d})"),
                        timeout=60).status_code == 201
