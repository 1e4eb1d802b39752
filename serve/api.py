"""The HTTP ingress: OpenAI ``/v1/embeddings``, Cohere/Jina ``/v1/rerank``, ``/v1/models``.

The ingress holds no model: it validates the body, finds the deployment serving the
requested ``model`` and awaits it through a deployment handle (where requests are
batched). Errors use OpenAI's shape, ``{"error": {"message", "type", "param", "code"}}``:
a malformed body is a 422 whose ``param`` and message name the field, an unknown model
a 404 naming it (and listing the served ones), a configured model whose weights are
absent a 404 with the reason.
"""


import base64
import uuid
from typing import Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from ray import serve

from serve.schemas import (
    Embedding, EmbeddingsRequest, EmbeddingsResponse, EmbeddingsUsage, ModelCard, ModelList, RerankRequest,
    RerankResponse, RerankResult,
)

app = FastAPI(title="Tessera model API", description="Embeddings and reranking served by Ray Serve deployments.")


class ApiError(Exception):
    """An error answered with ``status`` and an OpenAI-shaped body."""

    def __init__(self, status: int, message: str, *, param: str | None = None, kind: str = "invalid_request_error",
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.kind, self.code = status, message, param, kind, code


def error_body(message: str, *, param: str | None, kind: str, code: str | None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


@app.exception_handler(ApiError)
async def _api_error(_: Request, err: ApiError) -> JSONResponse:
    return JSONResponse(error_body(err.message, param=err.param, kind=err.kind, code=err.code), status_code=err.status)


@app.exception_handler(RequestValidationError)
async def _invalid_body(_: Request, err: RequestValidationError) -> JSONResponse:
    problems = []
    for item in err.errors():
        loc = [str(part) for part in item.get("loc", ()) if part != "body"]
        problems.append((loc, item.get("msg", "invalid")))
    message = "; ".join(f"{'.'.join(loc) or 'body'}: {msg}" for loc, msg in problems)
    param = problems[0][0][0] if problems and problems[0][0] else None  # the top-level field
    return JSONResponse(error_body(message, param=param, kind="invalid_request_error", code="invalid_value"),
                        status_code=422)


@serve.deployment(name="api", max_ongoing_requests=256)
@serve.ingress(app)
class ModelAPI:
    """Routes requests to the model deployments by the ``model`` field."""

    def __init__(self, handles: dict[str, Any], cards: list[dict[str, Any]]) -> None:
        self.handles = handles  # deployment name -> DeploymentHandle
        self.cards = [ModelCard.model_validate(card) for card in cards]
        self.by_name: dict[str, ModelCard] = {}
        for card in self.cards:
            for key in (card.id, *card.aliases):
                self.by_name[key] = card

    def _card(self, model: str, kind: str) -> ModelCard:
        card = self.by_name.get(model)
        served = sorted(c.id for c in self.cards if c.type == kind and c.status == "ready")
        if card is None or card.type != kind:
            what = "an embedding" if kind == "embedding" else "a rerank"
            raise ApiError(404, f"model '{model}' is not {what} model served here; "
                           f"served: {', '.join(served) or 'none'}", param="model", code="model_not_found")
        if card.status != "ready":
            raise ApiError(404, f"model '{model}' is configured but not deployed: {card.reason}", param="model",
                           code="model_not_found")
        return card

    @app.get("/v1/models")
    async def models(self) -> dict[str, Any]:
        return ModelList(data=self.cards).model_dump(exclude_none=True)

    @app.post("/v1/embeddings")
    async def embeddings(self, body: EmbeddingsRequest) -> dict[str, Any]:
        card = self._card(body.model, "embedding")
        handle = self.handles[card.deployment]
        if body.dimensions is not None:
            info = await handle.info.remote()
            if body.dimensions != info["dimension"]:
                raise ApiError(422, f"dimensions: model '{body.model}' gives {info['dimension']}-dimensional "
                               "embeddings; other sizes are not supported", param="dimensions")
        result = await self._call(handle.embed.remote(body.texts()), card)
        vectors = np.asarray(result["vectors"], dtype=np.float32)
        if body.encoding_format == "base64":
            data = [base64.b64encode(v.astype("<f4").tobytes()).decode("ascii") for v in vectors]
        else:
            data = vectors.tolist()
        tokens = int(result["tokens"])
        return EmbeddingsResponse(
            data=[Embedding(index=i, embedding=e) for i, e in enumerate(data)], model=body.model,
            usage=EmbeddingsUsage(prompt_tokens=tokens, total_tokens=tokens),
        ).model_dump()

    @app.post("/v1/rerank")
    async def rerank(self, body: RerankRequest) -> dict[str, Any]:
        card = self._card(body.model, "rerank")
        texts = body.texts()
        scores, tokens = np.zeros(0), 0
        if texts:
            result = await self._call(self.handles[card.deployment].score.remote(body.query, texts), card)
            scores, tokens = np.asarray(result["scores"], dtype=np.float64), result["tokens"]
        order = np.lexsort((np.arange(len(scores)), -scores))[: body.top_n]  # score desc, input order on ties
        results = [RerankResult(index=int(i), relevance_score=float(scores[i]),
                                document={"text": texts[i]} if body.return_documents else None) for i in order]
        usage: dict[str, Any] = {"total_tokens": tokens, "search_units": 1}
        return RerankResponse(id=str(uuid.uuid4()), results=results, model=body.model,
                              usage=usage).model_dump(exclude_none=True)

    @staticmethod
    async def _call(response: Any, card: ModelCard) -> dict[str, Any]:
        try:
            return await response
        except Exception as err:  # noqa: BLE001  (a model failure is the server's, named)
            raise ApiError(500, f"model '{card.id}' (deployment '{card.deployment}') failed: "
                           f"{type(err).__name__}: {err}", kind="server_error", code="model_error") from err
