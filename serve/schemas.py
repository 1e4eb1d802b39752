"""Request and response bodies of the HTTP API (OpenAI embeddings, Cohere/Jina rerank, model list).

Request models validate strictly enough that a malformed body is a 422 naming the
field. The embeddings body forbids unknown fields (as OpenAI does); the rerank body
ignores fields it does not use (Cohere's ``max_tokens_per_doc``, Jina's ``truncation``...)
so those clients work unchanged.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

MAX_INPUTS = 2048  # OpenAI's limit on texts per embeddings request
MAX_DOCUMENTS = 10_000  # Cohere's limit on documents per rerank request


class EmbeddingsRequest(BaseModel):
    """OpenAI ``POST /v1/embeddings``. Token-id arrays are refused (422): send text."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, description="Served embedding model (see GET /v1/models).")
    input: str | list[str] = Field(description="A text or a list of texts (token-id arrays are not supported).")
    encoding_format: Literal["float", "base64"] = Field("float", description="'float' lists or 'base64' of "
                                                        "little-endian float32.")
    dimensions: int | None = Field(None, gt=0, description="Must equal the model's dimension when given "
                                   "(truncated embeddings are not supported).")
    user: str | None = Field(None, description="Accepted and ignored (OpenAI's end-user id).")

    @field_validator("input", mode="before")
    @classmethod
    def _no_tokens(cls, value: Any) -> Any:
        if isinstance(value, list) and any(isinstance(v, (int, list)) and not isinstance(v, bool) for v in value):
            raise ValueError("token-id arrays are not supported: send the text (a string or a list of strings)")
        return value

    @field_validator("input")
    @classmethod
    def _some_text(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list) and not value:
            raise ValueError("must hold at least one text")
        if isinstance(value, list) and len(value) > MAX_INPUTS:
            raise ValueError(f"holds {len(value)} texts; at most {MAX_INPUTS} per request")
        return value

    def texts(self) -> list[str]:
        return [self.input] if isinstance(self.input, str) else list(self.input)


class Embedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class EmbeddingsUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingsResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: EmbeddingsUsage


class RerankDocument(BaseModel):
    """A document given as an object (Jina, Cohere v1); only ``text`` is read."""

    model_config = ConfigDict(extra="allow")

    text: str = Field(description="The document text.")


class RerankRequest(BaseModel):
    """Cohere ``POST /v1/rerank`` and Jina ``POST /v1/rerank`` bodies (they share these fields)."""

    model_config = ConfigDict(extra="ignore")

    model: str = Field(min_length=1, description="Served reranker (see GET /v1/models).")
    query: str = Field(min_length=1, description="The search query.")
    documents: list[str | RerankDocument] = Field(
        max_length=MAX_DOCUMENTS, description="Texts or {'text': ...} objects; an empty list gives empty results.")
    top_n: int | None = Field(None, gt=0, description="Return only the n best results (default: all).")
    return_documents: bool = Field(False, description="Echo each result's document as {'text': ...}.")

    def texts(self) -> list[str]:
        return [d if isinstance(d, str) else d.text for d in self.documents]


class RerankResult(BaseModel):
    index: int
    relevance_score: float
    document: dict[str, Any] | None = None


class RerankResponse(BaseModel):
    id: str
    results: list[RerankResult]
    model: str
    usage: dict[str, Any]


class ModelCard(BaseModel):
    """One entry of GET /v1/models (OpenAI's model object plus what Tessera knows about it)."""

    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "tessera"
    type: Literal["embedding", "rerank"]
    operator: str
    deployment: str
    aliases: list[str] = []
    status: Literal["ready", "missing"]
    reason: str | None = None


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]
