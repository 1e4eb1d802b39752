"""Request and response bodies of the HTTP API (OpenAI embeddings, Cohere/Jina rerank, model list).

Request models validate strictly enough that a malformed body is a 422 naming the
field, before anything reaches a model deployment. Numbers and booleans are strict, as OpenAI's and Cohere's are
(``top_n: "2"``, ``dimensions: "384"``, ``return_documents: "yes"`` are refused, not read). A text a tokenizer
cannot take (a lone surrogate such as ``"\\ud83d"``, which JSON allows) is refused here, since in a
deployment it would fail a whole batch of other clients' requests. The embeddings body
forbids unknown fields (as OpenAI does); the rerank bodies ignore fields they do not use
(Cohere v1's ``max_chunks_per_doc``, Jina's ``truncation``...) so those clients work unchanged.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Sequence

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator

from operators.unicode import blank, first_broken_text, unicode_problem

MAX_INPUTS = 2048  # OpenAI's limit on texts per embeddings request
MAX_DOCUMENTS = 10_000  # Cohere's limit on documents per rerank request


def as_base64(vectors: Any) -> list[str]:
    """Each vector's little-endian float32 bytes in base64 (OpenAI's and Cohere's ``base64`` embeddings)."""
    import base64

    import numpy as np

    return [base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode("ascii") for v in vectors]


def check_texts(texts: Sequence[str], item: str) -> None:
    """Refuse the first of ``texts`` that is not valid Unicode, naming its position as ``item`` N."""
    for i, text in enumerate(texts):
        problem = unicode_problem(text)
        if problem:
            raise ValueError(f"{item} {i} {problem}")


def check_some_text(texts: Sequence[str], item: str) -> None:
    """Refuse an empty (or blank) text to embed, naming its position: its vector would mean nothing (OpenAI and
    Cohere refuse one too). Blank as a search's query is (``operators.unicode.blank``): a NUL or a zero-width space
    alone, which ``str.strip`` keeps, was embedded."""
    for i, text in enumerate(texts):
        if blank(text):
            raise ValueError(f"{item} {i} is empty")


def _valid_text(value: Any) -> Any:
    problem = unicode_problem(value) if isinstance(value, str) else None
    if problem:
        raise ValueError(problem)
    return value


#: A string field that must be valid Unicode (for fields that are not inside a union). Checked before
#: pydantic's own str checks, which refuse a surrogate in a constrained field with a vaguer message.
Text = Annotated[str, BeforeValidator(_valid_text)]


class EmbeddingsRequest(BaseModel):
    """OpenAI ``POST /v1/embeddings``. Token-id arrays are read as the texts they encode (``serve.token_ids``)."""

    model_config = ConfigDict(extra="forbid")

    model: Text = Field(min_length=1, description="Served embedding model (see GET /v1/models).")
    input: str | list[str] = Field(description="A text or a list of texts; or, as OpenAI's API takes them, a text's "
                                   "token ids (or a list of such arrays) in OpenAI's cl100k_base encoding, which "
                                   "LangChain's OpenAIEmbeddings sends: read as the text they encode.")
    encoding_format: Literal["float", "base64"] = Field("float", description="'float' lists or 'base64' of "
                                                        "little-endian float32.")
    dimensions: int | None = Field(None, gt=0, strict=True, description="Must equal the model's dimension when given "
                                   "(truncated embeddings are not supported).")
    user: str | None = Field(None, description="Accepted and ignored (OpenAI's end-user id).")

    @field_validator("input", mode="before")
    @classmethod
    def _texts_of_tokens(cls, value: Any) -> Any:
        from serve import token_ids

        if token_ids.is_token_ids(value):
            return token_ids.decode(value)
        if isinstance(value, list) and any(isinstance(v, (int, list)) and not isinstance(v, bool) for v in value):
            raise ValueError("mixes texts and token ids, or holds an empty token-id array: send a text, a list of "
                             "texts, one text's token ids or a list of such arrays")
        return value

    @field_validator("input")
    @classmethod
    def _some_text(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list) and not value:
            raise ValueError("must hold at least one text")
        if isinstance(value, list) and len(value) > MAX_INPUTS:
            raise ValueError(f"holds {len(value)} texts; at most {MAX_INPUTS} per request")
        check_texts([value] if isinstance(value, str) else value, "text")
        check_some_text([value] if isinstance(value, str) else value, "text")
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
    """A document given as an object (Jina, Cohere v1): ranked by its ``text``, or by the fields ``rank_fields`` names
    (Cohere v1); echoed as sent."""

    model_config = ConfigDict(extra="allow")

    text: str | None = Field(None, description="The document text, ranked unless rank_fields names other fields.")

    def ranked_text(self, fields: Sequence[str]) -> str:
        """The values of ``fields``, in their order, one a line (each checked to be a string by ``RerankRequest``)."""
        values = self.model_dump()
        return "\n".join(values[field] for field in fields)


class RerankBody(BaseModel):
    """The fields every rerank body shares."""

    model_config = ConfigDict(extra="ignore")

    model: Text = Field(min_length=1, description="Served reranker (see GET /v1/models).")
    query: Text = Field(min_length=1, description="The search query.")
    top_n: int | None = Field(None, gt=0, strict=True, description="Return only the n best results (default: all).")
    # Cohere v2 dropped it, but litellm's cohere route (POST /v2/rerank) still sends it and reads the documents back
    return_documents: bool = Field(False, strict=True, description="Echo each result's document: {'text': ...} for "
                                   "a text, an object as it was sent.")

    @field_validator("query")
    @classmethod
    def _query_has_text(cls, query: str) -> str:
        if blank(query):  # blanks alone (a NUL, a zero-width space too, as /v1/search's): the scores would rank the
            # documents by nothing the caller asked
            raise ValueError("query is blank: give the text to rank the documents by")
        return query

    def texts(self) -> list[str]:
        raise NotImplementedError

    def shown(self) -> list[dict[str, Any]]:
        """Each document as a result echoes it (``return_documents``)."""
        return [{"text": text} for text in self.texts()]


class RerankRequest(RerankBody):
    """Cohere ``POST /v1/rerank`` and Jina ``POST /v1/rerank`` bodies (they share these fields). Cohere v1's
    ``rank_fields`` names the fields of object documents to rank by; it was ignored, so ``{"title", "text"}`` documents
    with ``rank_fields: ["title"]`` were ranked by their text, and ones without ``text`` refused."""

    rank_fields: list[Text] | None = Field(None, min_length=1, description="Cohere v1: the fields of object "
                                           "documents to rank by, their values read in this order (default: text).")
    documents: list[str | RerankDocument] = Field(
        max_length=MAX_DOCUMENTS, description="Texts or objects (ranked by their text, or their rank_fields); an "
        "empty list gives empty results.")

    @field_validator("documents")
    @classmethod
    def _documents_are_text(cls, documents: list[str | RerankDocument],
                            info: ValidationInfo) -> list[str | RerankDocument]:
        fields = info.data.get("rank_fields") or ["text"]
        for i, document in enumerate(documents):
            values = {} if isinstance(document, str) else document.model_dump()
            absent = [field for field in fields if not isinstance(document, str) and not isinstance(values.get(field),
                                                                                                    str)]
            if absent:
                raise ValueError(f"document {i} has no text in '{absent[0]}' to rank by (the fields ranked are "
                                 f"rank_fields, default ['text'], each a string)")
        # every field, the ranked ones and those only echoed back (return_documents: their encoding was a 500)
        sent = [d if isinstance(d, str) else d.model_dump(exclude_unset=True) for d in documents]
        if broken := first_broken_text(sent):
            raise ValueError(f"document {broken[0]} {broken[1]}")
        return documents

    def texts(self) -> list[str]:
        return _texts(self.documents, self.rank_fields or ["text"])

    def shown(self) -> list[dict[str, Any]]:
        return [{"text": d} if isinstance(d, str) else d.model_dump(exclude_unset=True) for d in self.documents]


def _texts(documents: Sequence[str | RerankDocument], fields: Sequence[str]) -> list[str]:
    return [d if isinstance(d, str) else d.ranked_text(fields) for d in documents]


class RerankV2Request(RerankBody):
    """Cohere v2 ``POST /v2/rerank`` (``cohere.ClientV2().rerank``): documents are strings."""

    documents: list[Text] = Field(max_length=MAX_DOCUMENTS, description="Texts; an empty list gives empty results.")
    max_tokens_per_doc: int | None = Field(None, gt=0, strict=True, description="At least the tokens the model "
                                           "reads of a document (less is a 422 that says how many): each model cuts "
                                           "documents at its own maximum length only.")
    priority: int | None = Field(None, strict=True, description="Accepted and ignored (Cohere's scheduling hint).")
    relevant_spans: Any = Field(None, description="Not supported: must be absent or null.")

    @field_validator("relevant_spans")
    @classmethod
    def _no_spans(cls, value: Any) -> None:
        if value is not None:
            raise ValueError("relevant spans are not supported here; leave the field out")
        return None

    def texts(self) -> list[str]:
        return list(self.documents)


class RerankResult(BaseModel):
    index: int
    relevance_score: float
    document: dict[str, Any] | None = None


class RerankResponse(BaseModel):
    id: str
    results: list[RerankResult]
    model: str
    usage: dict[str, Any]


class RerankV2Response(BaseModel):
    """Cohere v2's answer: results, and ``meta`` with the API version, billed units and tokens."""

    id: str
    results: list[RerankResult]
    meta: dict[str, Any]


class ModelCard(BaseModel):
    """One entry of GET /v1/models (OpenAI's model object plus what Tessera knows about it)."""

    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "tessera"
    type: Literal["embedding", "rerank", "chat", "flow"] = Field(description="flow: a flow that answers chat "
                                                                  "completions (model = its name).")
    operator: str = Field(description="The hosting operator, or for a language model its engine's deployment.")
    engine: str | None = Field(None, description="Language models: llama_cpp or vllm.")
    deployment: str | None = Field(None, description="The Serve deployment (none for a flow: it runs in the API).")
    context_window: int | None = Field(None, description="Language models: the tokens the model reads and writes "
                                       "at once, where the config says (llama_cpp: 4096; vllm: its max_model_len); "
                                       "a chat's max_tokens is at most this.")
    aliases: list[str] = []
    status: Literal["ready", "loading", "idle", "unhealthy", "missing"] = Field(
        description="ready: a replica has loaded the model; loading: none has yet; idle: scaled to zero (the next "
        "request loads it); unhealthy: its replicas fail to start; missing: not deployed (weights absent).")
    reason: str | None = None


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]
