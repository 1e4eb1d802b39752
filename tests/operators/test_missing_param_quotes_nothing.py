"""A required param left out is said to be missing, without the params it was given: pydantic's input for a missing
field is the params whole, so the error quoted them (``Field required (got {'api_key': 'sk-...'})``), a key of
``rerank.api`` included, into logs and clients' answers."""

from __future__ import annotations

import pytest

from flows.spec import FlowSpec
from operators.errors import ParamsError
from operators.registry import create


def test_a_missing_param_quotes_no_key_given_beside_it():
    with pytest.raises(ParamsError) as caught:
        create("rerank.api", {"api_key": "sk-not-for-logs-123"})
    assert caught.value.field == "params.url"
    assert caught.value.message.startswith("Field required"), caught.value.message
    assert "sk-not-for-logs-123" not in str(caught.value)


def test_a_missing_param_in_a_spec_says_only_that():
    spec = FlowSpec.parse({"steps": {"bm25": {"op": "retrieve.bm25"},
                                     "api": {"op": "rerank.api", "params": {"n": 5}}}})
    with pytest.raises(ParamsError) as caught:
        spec.build()
    assert caught.value.field == "steps.api.params.url"
    assert "(got" not in caught.value.message, caught.value.message


def test_a_missing_param_says_its_operator_gives_it_no_default():
    """Pydantic's "Field required" alone left a plugin's author (a Params field without a default) and a spec's
    (a step without that param) guessing which side to fix."""
    with pytest.raises(ParamsError) as caught:
        create("rerank.api", {})
    assert caught.value.message == ("Field required: the operator gives this parameter no default, so the step's "
                                    "params must set it"), caught.value.message
