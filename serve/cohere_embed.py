"""Cohere's embed API: ``POST /v2/embed`` (``cohere.ClientV2().embed``) and ``POST /v1/embed`` (``cohere.Client``).

The texts go to the same embedding deployment as OpenAI's ``/v1/embeddings``. Cohere's
``embedding_types`` are derived from the float vectors. ``int8``/``uint8`` scale each
component from [-1, 1], the range of a unit vector's components (the served encoders normalise),
so a text's codes do not depend on the other texts of the request. ``binary``/``ubinary`` are the
signs packed 8 to a byte (sentence-transformers' ``quantize_embeddings``). ``base64`` is the
little-endian float32 bytes. ``input_type`` is accepted: the served encoders embed queries and
documents alike. Images are refused.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from serve.schemas import MAX_INPUTS, Text, as_base64, check_some_text, check_texts

EmbeddingType = Literal["float", "int8", "uint8", "binary", "ubinary", "base64"]
InputType = Literal["search_document", "search_query", "classification", "clustering", "image"]


class TextPart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["text"] = Field(description="Only text parts are embedded here.")
    text: Text = Field(description="The text.")


class EmbedInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: list[TextPart] = Field(min_length=1, description="Text parts, embedded joined by a space.")


class _EmbedBody(BaseModel):
    """What both versions take and check alike."""

    model_config = ConfigDict(extra="forbid")

    model: Text = Field(min_length=1, description="Served embedding model (see GET /v1/models).")
    images: list[str] | None = Field(None, description="Not supported: must be absent.")
    truncate: Literal["END"] | None = Field(None, description="END (the default): the served encoders cut long "
                                            "texts at the end; NONE and START are not supported.")

    @field_validator("images")
    @classmethod
    def _no_images(cls, value: list[str] | None) -> None:
        if value is not None:
            raise ValueError("images are not supported here: no image embedding model is served")
        return None

    @field_validator("input_type", check_fields=False)
    @classmethod
    def _text_only(cls, value: str | None) -> str | None:
        if value == "image":
            raise ValueError("'image' is not supported here: no image embedding model is served")
        return value

    @field_validator("texts", check_fields=False)
    @classmethod
    def _texts(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            if len(value) > MAX_INPUTS:
                raise ValueError(f"holds {len(value)} texts; at most {MAX_INPUTS} per request")
            check_texts(value, "text")
            check_some_text(value, "text")
        return value


class CohereEmbedRequest(_EmbedBody):
    """Cohere v2 ``POST /v2/embed``: ``texts`` (or ``inputs`` of text parts), ``input_type``, ``embedding_types``."""

    input_type: InputType = Field(description="Accepted: the served encoders embed queries and documents alike; "
                                  "'image' is refused (no image models are served).")
    texts: list[Text] | None = Field(None, min_length=1, description=f"Texts to embed (at most {MAX_INPUTS}).")
    inputs: list[EmbedInput] | None = Field(None, min_length=1, max_length=MAX_INPUTS,
                                            description="Inputs of text parts, instead of texts.")
    embedding_types: list[EmbeddingType] = Field(["float"], min_length=1, description="The types wanted: float, "
                                                 "int8, uint8, binary, ubinary, base64.")
    output_dimension: int | None = Field(None, gt=0, strict=True,
                                         description="Must equal the model's dimension when given.")
    max_tokens: int | None = Field(None, gt=0, strict=True,
                                   description="At least the tokens the model reads of a text (less is a 422 "
                                   "that says how many): each model cuts texts at its own maximum length only.")
    priority: int | None = Field(None, strict=True, description="Accepted and ignored (Cohere's scheduling hint).")

    @model_validator(mode="after")
    def _one_source(self) -> "CohereEmbedRequest":
        if (self.texts is None) == (self.inputs is None):
            raise ValueError("give the texts in exactly one of texts and inputs")
        return self

    @field_validator("inputs")
    @classmethod
    def _inputs_with_text(cls, value: list[EmbedInput] | None) -> list[EmbedInput] | None:
        if value is not None:
            check_some_text([" ".join(part.text for part in item.content) for item in value], "input")
        return value

    def all_texts(self) -> list[str]:
        if self.texts is not None:
            return list(self.texts)
        return [" ".join(part.text for part in item.content) for item in self.inputs or []]


class CohereEmbedV1Request(_EmbedBody):
    """Cohere v1 ``POST /v1/embed``: ``texts``, optional ``input_type`` and ``embedding_types``."""

    texts: list[Text] = Field(min_length=1, description=f"Texts to embed (at most {MAX_INPUTS}).")
    input_type: InputType | None = Field(None, description="Accepted, as in /v2/embed.")
    embedding_types: list[EmbeddingType] | None = Field(None, min_length=1, description="The types wanted; "
                                                        "absent: the floats as a plain list (embeddings_floats).")

    def all_texts(self) -> list[str]:
        return list(self.texts)


def by_type(vectors: np.ndarray, types: list[str]) -> dict[str, Any]:
    """The embeddings as each of ``types`` (Cohere's ``embeddings`` object of ``embeddings_by_type``)."""
    from sentence_transformers.quantization import quantize_embeddings

    vectors = np.asarray(vectors, dtype=np.float32)
    out: dict[str, Any] = {}
    for kind in dict.fromkeys(types):
        if kind == "float":
            out[kind] = vectors.tolist()
        elif kind == "base64":
            out[kind] = as_base64(vectors)
        elif kind in ("int8", "uint8"):
            unit = np.stack([-np.ones(vectors.shape[1]), np.ones(vectors.shape[1])]).astype(np.float32)
            out[kind] = quantize_embeddings(np.clip(vectors, -1, 1), precision=kind, ranges=unit).tolist()
        else:  # binary, ubinary: the signs, packed
            out[kind] = quantize_embeddings(vectors, precision=kind).tolist()
    return out


def response(vectors: np.ndarray, texts: list[str], tokens: int, types: list[str] | None,
             version: str) -> dict[str, Any]:
    """The embed response: ``embeddings_by_type`` for the types asked, else (v1 only) ``embeddings_floats``."""
    meta = {"api_version": {"version": version}, "billed_units": {"input_tokens": tokens}}
    if types is None:
        return {"id": str(uuid.uuid4()), "response_type": "embeddings_floats",
                "embeddings": np.asarray(vectors, dtype=np.float32).tolist(), "texts": texts, "meta": meta}
    return {"id": str(uuid.uuid4()), "response_type": "embeddings_by_type", "embeddings": by_type(vectors, types),
            "texts": texts, "meta": meta}
