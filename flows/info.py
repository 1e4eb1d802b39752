"""Pipeline info, generated from the operator registry (``tessera ops``, ``/pipeline/info``).

Nothing here is written by hand per operator: every entry comes from the class
(``name``, ``scope``, docstring, resource hints) and the pydantic JSON schema of its
``Params`` (titles, descriptions, types, defaults, ``Literal``/enum values, bounds).

Two shapes:

* ``operator_info(cls)``: Tessera's own, complete description of one operator.
* ``mosaic_info()``: mosaicRAG's ``/pipeline/info`` body, ``{op_id: {name, category,
  description, parameters}}``, where each parameter is
  ``{title, description, type, enforce-limit, required, supported-values, default}``.
  The mapping from a pydantic field (values are strings, as mosaicRAG's UI sends them):

  ==========================================  ==========  =============  =======================
  field                                       type        enforce-limit  supported-values
  ==========================================  ==========  =============  =======================
  ``Literal[...]`` or an ``Enum``             dropdown    true           the allowed values
  ``bool``                                    dropdown    true           ``["Yes", "No"]``
  has ``Field(examples=[...])``               dropdown    false          the examples (+ default)
  anything else                               text        false          ``[default]`` or ``[]``
  ==========================================  ==========  =============  =======================

  Booleans are ``Yes``/``No`` because that is what mosaicRAG's UI sends, and what
  ``flows.spec.from_mosaic`` maps back to ``True``/``False``. ``enforce-limit: false``
  on a dropdown means the values are suggestions and any text is accepted (mosaicRAG's
  meaning). Defaults are rendered as strings (``None`` as ``""``, lists as JSON).
"""

from __future__ import annotations

import enum
import json
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined, to_jsonable_python

from flows.runner import caches
from operators.base import Operator
from operators.registry import all_operators, skipped_modules

#: JSON-schema keywords that bound a value, reported as ``bounds``.
BOUND_KEYS = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum",
              "minLength", "maxLength", "minItems", "maxItems", "pattern", "multipleOf")

#: mosaicRAG-style category names for Tessera's category folders; others are title-cased.
CATEGORY_NAMES = {
    "sources": "Data Source",
    "retrieve": "Retrieval",
    "index": "Indexing",
    "preprocess": "Pre-Processing",
    "rerank": "Reranking",
    "fuse": "Fusion",
    "summarize": "Summarization",
    "analyze": "Metadata Analysis",
    "query": "Query Processing",
    "generate": "Generation",
    "postprocess": "Post-Processing",
}

# Word parts written in capitals in display names (``retrieve.corpus_bm25`` -> "Corpus BM25").
_ACRONYMS = {"rrf", "llm", "mmr", "tfidf", "tf", "idf", "id", "url", "html", "pdf", "json", "csv",
             "jsonl", "sql", "api", "splade", "gpu", "cpu", "qa", "ner", "ocr"}


# -- one operator ---------------------------------------------------------------


def display_name(cls: type[Operator]) -> str:
    """A human name: the class's ``display_name`` if it sets one, else derived from its id.

    ``analyze.word_count`` -> "Word count"; ``retrieve.corpus_bm25`` -> "Corpus BM25".
    """
    explicit = getattr(cls, "display_name", "")
    if explicit:
        return str(explicit)
    words = (cls.name.split(".", 1)[-1] or cls.__name__).split("_")
    out = []
    for i, word in enumerate(words):
        if word.lower() in _ACRONYMS or any(ch.isdigit() for ch in word):
            out.append(word.upper())
        else:
            out.append(word.capitalize() if i == 0 else word.lower())
    return " ".join(out)


def category_name(category: str) -> str:
    return CATEGORY_NAMES.get(category, category.replace("_", " ").title())


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Follow a local ``$ref`` (pydantic puts enums and nested models in ``$defs``)."""
    seen = 0
    while "$ref" in schema and seen < 10:
        target = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        seen += 1
    return schema


def _field_shape(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """Type, nullability, allowed values, item type and bounds of one property schema."""
    prop = _resolve(prop, defs)
    variants = prop.get("anyOf") or prop.get("oneOf")
    nullable = False
    if variants:
        variants = [_resolve(v, defs) for v in variants]
        non_null = [v for v in variants if v.get("type") != "null"]
        nullable = len(non_null) < len(variants)
        if len(non_null) == 1:
            inner = _field_shape({**non_null[0]}, defs)
            inner["nullable"] = nullable or inner["nullable"]
            return inner
        types = sorted({v.get("type", "any") for v in non_null})
        allowed = None
        if all("enum" in v or "const" in v for v in non_null):
            allowed = [x for v in non_null for x in (v.get("enum") or [v.get("const")])]
        return {"type": " | ".join(types), "nullable": nullable, "allowed": allowed,
                "items": None, "bounds": {}}
    allowed = prop.get("enum")
    if allowed is None and "const" in prop:
        allowed = [prop["const"]]
    kind = prop.get("type")
    if kind is None and allowed:
        kind = _json_type(allowed[0])
    items = None
    if kind == "array" and isinstance(prop.get("items"), dict):
        items = _field_shape(prop["items"], defs)["type"]
    bounds = {k: prop[k] for k in BOUND_KEYS if k in prop}
    return {"type": kind or "any", "nullable": nullable, "allowed": list(allowed) if allowed else None,
            "items": items, "bounds": bounds}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "any"


def _default(params: type[BaseModel], name: str) -> tuple[bool, Any]:
    """``(required, default)`` of a field, the default in its JSON form."""
    field = params.model_fields[name]
    if field.is_required():
        return True, None
    if field.default is not PydanticUndefined:
        value = field.default
    else:  # default_factory: call it, it builds a fresh default
        value = field.get_default(call_default_factory=True)
    if isinstance(value, enum.Enum):
        value = value.value
    return False, to_jsonable_python(value, fallback=str)


def parameters_info(params: type[BaseModel]) -> dict[str, dict[str, Any]]:
    """Each field of a ``Params`` model: title, description, type, default, allowed values, bounds."""
    schema = params.model_json_schema()
    defs = schema.get("$defs", {})
    out: dict[str, dict[str, Any]] = {}
    for name, prop in schema.get("properties", {}).items():
        shape = _field_shape(prop, defs)
        required, default = _default(params, name)
        resolved = _resolve(prop, defs)
        info = {
            "title": prop.get("title") or name.replace("_", " ").capitalize(),
            "description": prop.get("description") or resolved.get("description") or "",
            "type": shape["type"],
            "required": required,
            "default": default,
            "nullable": shape["nullable"],
            "allowed": shape["allowed"],
            "bounds": shape["bounds"],
        }
        if shape["items"]:
            info["items"] = shape["items"]
        if "examples" in prop:
            info["examples"] = list(prop["examples"])
        out[name] = info
    return out


def operator_info(cls: type[Operator]) -> dict[str, Any]:
    """Everything ``tessera ops`` and the API say about one operator, from the class alone."""
    return {
        "id": cls.name,
        "name": display_name(cls),
        "category": cls.category(),
        "description": cls.description(),
        "scope": cls.scope,
        "version": cls.version,
        "aliases": list(cls.aliases),
        # what the runner does (``flows.runner.caches``: a source never), or the condition where params decide it
        "cacheable": f"if {cls.cacheable_if}" if cls.cacheable_if and caches(cls) else caches(cls),
        "resources": {"num_gpus": cls.num_gpus, "num_cpus": cls.num_cpus,
                      "batch_size": cls.batch_size, "concurrency": cls.concurrency},
        "module": cls.__module__,
        "parameters": parameters_info(cls.Params),
    }


def all_operator_info() -> dict[str, dict[str, Any]]:
    """``operator_info`` of every registered operator, by id."""
    return {name: operator_info(cls) for name, cls in all_operators().items()}


def skipped() -> dict[str, str]:
    """Operator modules that could not be imported (a missing optional dependency), with why."""
    return skipped_modules()


# -- mosaicRAG's /pipeline/info -------------------------------------------------------


def _mosaic_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "Yes" if value else "No"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def mosaic_parameter(info: dict[str, Any]) -> dict[str, Any]:
    """One parameter in mosaicRAG's shape (see the module docstring for the mapping)."""
    default = _mosaic_value(info["default"])
    if info["allowed"]:
        kind, enforce = "dropdown", True
        values = [_mosaic_value(v) for v in info["allowed"]]
        if info["nullable"] and "" not in values:
            values.append("")
    elif info["type"] == "boolean":
        kind, enforce, values = "dropdown", True, ["Yes", "No"]
    elif info.get("examples"):
        kind, enforce = "dropdown", False
        values = [_mosaic_value(v) for v in info["examples"]]
        if not info["required"] and default not in values:
            values.insert(0, default)
    else:
        kind, enforce = "text", False
        values = [] if info["required"] or default == "" else [default]
    return {
        "title": info["title"],
        "description": info["description"] or info["title"],
        "type": kind,
        "enforce-limit": enforce,
        "required": info["required"],
        "supported-values": values,
        "default": default,
    }


def mosaic_step_info(cls: type[Operator]) -> dict[str, Any]:
    info = operator_info(cls)
    return {
        "name": info["name"],
        "category": category_name(info["category"]),
        "description": info["description"],
        "parameters": {name: mosaic_parameter(p) for name, p in info["parameters"].items()},
    }


def mosaic_info() -> dict[str, dict[str, Any]]:
    """mosaicRAG's ``/pipeline/info``: every registered operator, by id."""
    return {name: mosaic_step_info(cls) for name, cls in all_operators().items()}
