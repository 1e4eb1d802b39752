"""Pipeline info is derived from the registry: real operators, real values, mosaicRAG's shape."""

from __future__ import annotations

import enum
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from flows.info import (
    all_operator_info,
    display_name,
    mosaic_info,
    mosaic_parameter,
    operator_info,
    parameters_info,
)
from flows.spec import from_mosaic
from operators.registry import all_operators, get_operator

MOSAIC_PARAM_KEYS = {"title", "description", "type", "enforce-limit", "required", "supported-values", "default"}


def test_reduce_info_comes_from_its_params_and_class():
    info = operator_info(get_operator("postprocess.reduce"))
    assert info["id"] == "postprocess.reduce"
    assert info["category"] == "postprocess" and info["scope"] == "query"
    assert info["description"].startswith("Keep the top k rows of each query")
    assert info["aliases"] == ["reduction", "reduce", "ReductionStep"]
    k = info["parameters"]["k"]
    assert k["type"] == "integer" and k["default"] == 10 and k["required"] is False
    assert k["bounds"] == {"exclusiveMinimum": 0}
    assert k["description"] == "Rows to keep per query."
    assert info["parameters"]["rank_column"]["default"] == "rank"


def test_cacheable_is_a_condition_where_the_params_decide_it():
    assert operator_info(get_operator("postprocess.reduce"))["cacheable"] is True
    assert operator_info(get_operator("rerank.api"))["cacheable"] is False
    for name in ("generate.answer", "summarize.documents", "rerank.llm_tournament", "query.expand"):
        assert operator_info(get_operator(name))["cacheable"] == "if temperature == 0 or seed is set", name


def test_word_count_info():
    info = operator_info(get_operator("analyze.word_count"))
    assert info["name"] == "Word count"
    assert info["description"] == "Count the words of a text column and show the count as a chip."
    assert info["scope"] == "row" and info["resources"]["batch_size"] == 1024
    params = info["parameters"]
    assert list(params) == ["input_column", "output_column"]
    assert params["input_column"]["default"] == "text" and params["input_column"]["type"] == "string"
    assert params["output_column"]["default"] == "word_count"
    assert params["output_column"]["allowed"] is None and params["output_column"]["bounds"] == {}


def test_corpus_bm25_info_and_display_name():
    info = operator_info(get_operator("retrieve.corpus_bm25"))
    assert info["name"] == "Corpus BM25"
    assert "demo ranker" in info["description"]
    k = info["parameters"]["k"]
    assert k["bounds"] == {"exclusiveMinimum": 0, "maximum": 10_000} and k["examples"] == [5, 10, 50, 100]
    assert info["parameters"]["index_title"]["type"] == "boolean"


class Colour(str, enum.Enum):
    red = "red"
    blue = "blue"


class Example(BaseModel):
    model_config = ConfigDict(extra="forbid")
    needed: str = Field(description="A required field.")
    mode: Literal["fast", "exact"] = Field("fast", description="A Literal.")
    colour: Colour = Field(Colour.blue, description="An enum.")
    flag: bool = Field(False, description="A boolean.")
    limit: int | None = Field(None, ge=1, le=5, description="Optional and bounded.")
    words: list[str] = Field(default_factory=lambda: ["a", "b"], description="A list with a factory.")
    ratio: float = Field(0.5, gt=0, lt=1, description="Open interval.")


def test_parameters_info_reads_every_kind_of_field():
    info = parameters_info(Example)
    assert info["needed"]["required"] is True and info["needed"]["default"] is None
    assert info["mode"]["allowed"] == ["fast", "exact"] and info["mode"]["type"] == "string"
    assert info["colour"]["allowed"] == ["red", "blue"] and info["colour"]["default"] == "blue"
    assert info["colour"]["description"] == "An enum."
    assert info["flag"]["type"] == "boolean" and info["flag"]["default"] is False
    assert info["limit"]["nullable"] is True and info["limit"]["type"] == "integer"
    assert info["limit"]["bounds"] == {"minimum": 1, "maximum": 5}
    assert info["words"]["default"] == ["a", "b"] and info["words"]["items"] == "string"
    assert info["ratio"]["bounds"] == {"exclusiveMinimum": 0, "exclusiveMaximum": 1}


def test_mosaic_parameter_mapping():
    info = parameters_info(Example)
    mode = mosaic_parameter(info["mode"])
    assert mode == {"title": "Mode", "description": "A Literal.", "type": "dropdown", "enforce-limit": True,
                    "required": False, "supported-values": ["fast", "exact"], "default": "fast"}
    assert mosaic_parameter(info["colour"])["supported-values"] == ["red", "blue"]
    flag = mosaic_parameter(info["flag"])
    assert flag["type"] == "dropdown" and flag["supported-values"] == ["Yes", "No"] and flag["default"] == "No"
    needed = mosaic_parameter(info["needed"])
    assert needed["type"] == "text" and needed["required"] is True and needed["supported-values"] == []
    limit = mosaic_parameter(info["limit"])
    assert limit["type"] == "text" and limit["default"] == "" and limit["enforce-limit"] is False
    assert mosaic_parameter(info["words"])["default"] == '["a", "b"]'


def test_mosaic_info_covers_the_registry_in_mosaics_shape():
    body = mosaic_info()
    assert set(body) == set(all_operators())
    json.dumps(body)
    for op_id, step in body.items():
        assert set(step) == {"name", "category", "description", "parameters"}, op_id
        assert step["description"], f"{op_id} has no description"
        for name, param in step["parameters"].items():
            assert set(param) == MOSAIC_PARAM_KEYS, (op_id, name)
            assert param["type"] in ("dropdown", "text")
            assert isinstance(param["default"], str)
            assert all(isinstance(v, str) for v in param["supported-values"])
            if param["enforce-limit"] and not param["required"]:
                assert param["default"] in param["supported-values"], (op_id, name)
    reduce = body["postprocess.reduce"]
    assert reduce["category"] == "Post-Processing"
    assert reduce["parameters"]["k"]["default"] == "10" and reduce["parameters"]["k"]["type"] == "text"
    k = body["retrieve.corpus_bm25"]["parameters"]["k"]
    assert k["type"] == "dropdown" and k["enforce-limit"] is False and k["supported-values"] == ["5", "10", "50", "100"]
    flag = body["retrieve.corpus_bm25"]["parameters"]["index_title"]
    assert (flag["supported-values"], flag["default"], flag["enforce-limit"]) == (["Yes", "No"], "Yes", True)


def test_mosaic_defaults_are_accepted_back_by_the_mosaic_dialect():
    """What the UI would send from the advertised defaults validates to the operators' defaults."""
    body = mosaic_info()
    ops = ["retrieve.corpus_bm25", "postprocess.reduce", "analyze.word_count"]
    request = {"query": "honey bees"}
    for i, op in enumerate(ops, 1):
        params = {name: p["default"] for name, p in body[op]["parameters"].items()}
        request[str(i)] = {"id": op, "parameters": params}
    spec, query = from_mosaic(request)
    flow = spec.build()
    assert query == "honey bees"
    for i, op in enumerate(ops, 1):
        assert flow.operators[str(i)].params == get_operator(op).Params()


def test_every_operators_advertised_defaults_read_back_as_its_defaults():
    """Those three were the operators without a None or a list default: sent back as advertised (None as '', a
    list as its JSON text), a filter, a cutoff, an RRF's weights or query.expand's strategies were refused."""
    from operators.registry import create

    body, checked, failed = mosaic_info(), 0, {}
    for op in sorted(body):
        try:
            defaults = create(op, {}, step_id="1").params
        except Exception:  # noqa: BLE001  (a param without a default: no request of defaults alone)
            continue
        params = {name: p["default"] for name, p in body[op]["parameters"].items() if not p["required"]}
        spec, _ = from_mosaic({"query": "honey", "1": {"id": op, "parameters": params}})
        try:
            read = spec.build().operators["1"].params
        except Exception as err:  # noqa: BLE001
            failed[op] = str(err)[:200]
            continue
        checked += 1
        if read != defaults:
            failed[op] = f"read back as {read!r}"
    assert not failed, failed
    assert checked >= 30, checked  # (most operators; those needing an index or a model are made with one)
    assert any(body[op]["parameters"].get("strategies", {}).get("default", "").startswith("[") for op in body)


def test_every_registered_operator_is_described():
    infos = all_operator_info()
    assert set(infos) == set(all_operators())
    for op_id, info in infos.items():
        assert info["description"], op_id
        assert info["name"] == display_name(get_operator(op_id))
        for name, param in info["parameters"].items():
            assert param["description"], f"{op_id}.{name} has no description"
