"""The HTTP ingress: OpenAI ``/v1/embeddings`` and ``/v1/chat/completions`` (serve/chat/chat.py), Cohere/Jina
``/v1/rerank``, Cohere v2 ``/v2/rerank``, Cohere's ``/v2/embed`` and ``/v1/embed`` (serve/cohere_embed.py) and
``/v2/chat`` (serve/chat/cohere_chat.py),
``/v1/models``, ``/healthz``; and beside them the flow routes (``serve/routes/*.py``: tasks, saved flows,
search, chat, indices), which the same replica serves with ``serve.service``, and the web UI at ``/ui/``.

The ingress holds no model: it validates the body, finds the deployment serving the
requested ``model`` and awaits it through a deployment handle (where requests are
batched). Every error uses OpenAI's shape (serve/http/errors.py, serve/http/error_handlers.py): a malformed body is a
422 whose ``param`` and message name the field, an unknown model a 404 naming it (and
listing the served ones), a configured model whose weights are absent a 404 with the
reason, a model that fails a 500 naming it and the request id, never a traceback.
"""


import asyncio
import uuid
from typing import Any

import numpy as np
from fastapi import Request
from fastapi_offline import FastAPIOffline
from ray import serve

from operators.errors import one_line
from serve import cohere_embed
from serve.chat import chat, chat_flows, cohere_chat
from serve.health import deployment_statuses, failed_deployments, live_cards, readiness, service_readiness
from serve.http import draining, error_handlers, errors, json_values
from serve.http import path_text  # noqa: F401  (the {model_id:text} convertor: a route's last part that holds any text)
from serve.http.errors import ApiError
from serve.routes import (
    chat as routes_chat, flows as routes_flows, indices as routes_indices, keys as routes_keys, search as routes_search,
    tasks as routes_tasks, ui as routes_ui,
)
from serve.schemas import (
    as_base64, Embedding, EmbeddingsRequest, EmbeddingsResponse, EmbeddingsUsage, ModelCard, ModelList, RerankBody,
    RerankRequest, RerankResponse, RerankResult, RerankV2Request, RerankV2Response,
)
from serve.security import auth, browser_guard

# FastAPI's /docs and /redoc load Swagger UI and ReDoc from a CDN, blank without internet: fastapi-offline serves the
# same pages with the scripts from its package (under /static-offline-docs).
# redirect_slashes off: Starlette answered a path with a trailing slash (POST /v1/search/) with a 307 and no body; it
# is a JSON 404 that names the route without it (serve/http/error_handlers.py), and the page's /ui is a route of its own
# (serve/routes/ui.py).
app = FastAPIOffline(title="Tessera API", description="Flows as tasks and searches (mosaicRAG's task API), saved "
                     "flows, chats, and the models: embeddings and reranking served by Ray Serve deployments.",
                     redirect_slashes=False)
for _router in (routes_tasks.router, routes_flows.router, routes_search.router, routes_chat.router,
                routes_indices.router, routes_keys.router, routes_ui.router):
    app.include_router(_router)
app.mount(routes_ui.UI_PATH, routes_ui.static_files(), name="ui")
_describe_routes = app.openapi
app.openapi = lambda: auth.declare_keys(_describe_routes())  # generated once, then cached by FastAPI
app.add_middleware(auth.BodyLimit)
app.add_middleware(auth.KeyGuard)  # outside the body limit: a caller without a key is refused before its body is read
app.add_middleware(browser_guard.LocalBrowsers)  # outside both: a web page is refused before anything is read
error_handlers.install(app)  # outermost of the answering layers
app.add_middleware(json_values.JsonValues)  # around them: every refusal quotes a value as JSON writes it
app.add_middleware(draining.DrainGuard)  # outside them all: every request counts while the service shuts down


def not_served(model_id: str, cards: list[ModelCard]) -> ApiError:
    """The 404 of ``GET /v1/models/{model_id}`` for an id that names no card: the close names and the served models
    among ``cards`` (the app's models, the flows that answer), those it can run only, as a chat's 404 lists them: a
    missing one (``rag_gold``, whose dataset is not there; a model whose weights are absent) was listed as served."""
    from flows import store as flow_store

    served = sorted({card.id for card in cards if card.status != "missing"})
    return ApiError(404, f"model '{one_line(model_id, 60)}' is not served here"
                    f"{flow_store.did_you_mean(model_id, served)}; "
                    f"served: {', '.join(served) or 'none'}", param="model", code="model_not_found")


def check_cut(card: ModelCard, info: dict[str, Any], field: str, asked: int | None) -> None:
    """A 422 naming ``field`` (Cohere's ``max_tokens``, ``max_tokens_per_doc``) when it asks to cut each text shorter
    than the model reads it (its replica's ``info()["max_tokens"]``): the texts were read whole up to the model's own
    length, as if the field had not been sent. At or above that length it asks for nothing more, and is taken; so
    is any value for a model whose length is unknown."""
    reads = info.get("max_tokens")
    if asked is not None and reads is not None and asked < reads:
        raise ApiError(422, f"{field}: model '{card.id}' reads up to {reads} tokens of a text and cuts only there; "
                       f"cutting at {asked} is not supported: leave {field} out, or send {reads} or more",
                       param=field, code="invalid_value")


@serve.deployment(name="api", max_ongoing_requests=256)
@serve.ingress(app)
class ModelAPI:
    """Routes requests to the model deployments by the ``model`` field."""

    def __init__(self, handles: dict[str, Any], cards: list[dict[str, Any]], service: dict[str, Any] | None = None,
                 served: list[dict[str, Any]] | None = None) -> None:
        errors.log_through_serve()  # our records (a 500's traceback) in the replica's log, with time and level
        self.handles = handles  # deployment name -> DeploymentHandle
        self.cards = [ModelCard.model_validate(card) for card in cards]
        self.by_name: dict[str, ModelCard] = {}
        for card in self.cards:
            for key in (card.id, *card.aliases):
                self.by_name[key] = card
        self.app_name = serve.get_replica_context().app_name
        host = auth.http_host()
        browser_guard.configure(local_only=auth.is_loopback(host) and not (service or {}).get("keys"))
        if service is not None:
            auth.check_exposure(host, bool(service["keys"]), service["allow_public_without_keys"])
            limits = service["limits"]
            auth.configure(service["keys"], limits["max_body_bytes"], limits["max_upload_bytes"])
            from serve.service import Service

            self.service = Service(service, served or [], self.app_name, model_names=self.by_name)
        else:  # a models-only app (service: null) bounds its bodies as a service does by default
            from serve.service_settings import Limits

            defaults = Limits()
            auth.configure({}, defaults.max_body_bytes, defaults.max_upload_bytes)

    def __del__(self) -> None:
        """Serve calls it when the replica shuts down: the service's threads stop and its database connections close
        (``Service.close``) rather than being cut when the process ends."""
        service = getattr(self, "service", None)
        if service is not None:
            service.close()

    async def drain(self) -> int:
        """Take no new request from now on (503 ``shutting_down``); the requests still in flight and the tasks this
        replica started that have not ended: an upload or a task acknowledged with 202 was interrupted by the shutdown
        that followed at once. ``tessera serve``'s runner calls it on every replica when it is told to stop, until
        each answers 0 (serve/http/draining.py)."""
        service = getattr(self, "service", None)
        return draining.drain() + (service.watched_tasks() if service is not None else 0)

    def _card(self, model: str, kind: str) -> ModelCard:
        card = self.by_name.get(model)
        served = sorted(c.id for c in self.cards if c.type == kind and c.status != "missing")
        if card is None or card.type != kind:
            what = "an embedding" if kind == "embedding" else "a rerank"
            raise ApiError(404, f"model '{one_line(model, 60)}' is not {what} model served here; "
                           f"served: {', '.join(served) or 'none'}", param="model", code="model_not_found")
        if card.status == "missing":
            raise ApiError(404, f"model '{model}' is configured but not deployed: {card.reason}", param="model",
                           code="model_not_found")
        return card

    async def _usable(self, card: ModelCard) -> None:
        """A 503 naming the model when Serve gave up on its deployment, rather than a request that waits forever."""
        if card.deployment in await failed_deployments(self.app_name):
            raise ApiError(503, f"model '{card.id}' (deployment '{card.deployment}') failed to start and Serve stopped "
                           "retrying it (GET /healthz says why); it answers once the app is deployed again",
                           kind="server_error", code="deployment_failed")

    async def _live_cards(self) -> list[ModelCard]:
        return live_cards(self.cards, await deployment_statuses(self.app_name))

    @app.get("/v1/models")
    async def models(self, request: Request) -> dict[str, Any]:
        """The served models with their state, and the flows that answer chat completions (``type: flow``)."""
        live = await self._live_cards()
        flows = await asyncio.to_thread(chat_flows.flow_cards, routes_tasks.tenant(request), live)
        return ModelList(data=[*live, *flows]).model_dump(exclude_none=True)

    @app.get("/v1/models/{model_id:text}")
    async def model(self, model_id: str, request: Request) -> dict[str, Any]:
        """OpenAI's ``models.retrieve``: one card, found by its id or an alias, or a flow that answers."""
        card = self.by_name.get(model_id)
        if card is None:
            flows = await asyncio.to_thread(chat_flows.flow_cards, routes_tasks.tenant(request),
                                            await self._live_cards())
            for flow in flows:
                if flow.id == model_id:
                    return flow.model_dump(exclude_none=True)
            raise not_served(model_id, [*self.cards, *flows])
        (live,) = live_cards([card], await deployment_statuses(self.app_name))
        return live.model_dump(exclude_none=True)

    @app.get("/healthz")
    async def healthz(self) -> dict[str, Any]:
        """200 when every configured model that is not missing has loaded in a replica and, with the flow routes,
        the task store answers and $TESSERA_HOME is writable; 503 naming what is not ready, with each model's state
        as the 200 has it (the web UI's badge names the models still loading)."""
        cards = await self._live_cards()
        models = {card.id: card.status for card in cards}
        service = getattr(self, "service", None)
        broken = await service_readiness(service) if service is not None else []
        waiting = "; ".join(filter(None, [*broken, readiness(cards)]))
        if waiting:
            param = broken[0].split(":", 1)[0] if broken else None  # task_store or tessera_home
            raise ApiError(503, f"not ready: {waiting}", param=param, kind="server_error", code="not_ready",
                           extra={"models": models})
        body: dict[str, Any] = {"status": "ok", "models": models}
        if service is not None:
            body["task_store"] = body["tessera_home"] = "ok"
            if service.default_index:  # a search that names no index reads it: "missing" is its 503's cause
                body["default_index"] = "missing" if service.default_index_missing() else "ok"
        return body

    @app.head("/healthz")
    async def healthz_head(self) -> dict[str, Any]:
        """``GET /healthz``'s status and headers without its body: the probe of load balancers that send ``HEAD``
        (a route of its own, for an operation id of its own in the API's description)."""
        return await self.healthz()

    @app.post("/v1/embeddings")
    async def embeddings(self, body: EmbeddingsRequest) -> dict[str, Any]:
        vectors, tokens = await self._embed(body.model, body.texts(), body.dimensions, "dimensions")
        if body.encoding_format == "base64":
            data = as_base64(vectors)
        else:
            data = vectors.tolist()
        return EmbeddingsResponse(
            data=[Embedding(index=i, embedding=e) for i, e in enumerate(data)], model=body.model,
            usage=EmbeddingsUsage(prompt_tokens=tokens, total_tokens=tokens),
        ).model_dump()

    @app.post("/v2/embed")
    async def embed_v2(self, body: cohere_embed.CohereEmbedRequest) -> dict[str, Any]:
        """Cohere v2 (``cohere.ClientV2().embed``): ``embeddings`` by type (float, int8, uint8, binary, ...)."""
        texts = body.all_texts()
        vectors, tokens = await self._embed(body.model, texts, body.output_dimension, "output_dimension",
                                            body.max_tokens)
        return cohere_embed.response(vectors, texts, tokens, body.embedding_types, version="2")

    @app.post("/v1/embed")
    async def embed_v1(self, body: cohere_embed.CohereEmbedV1Request) -> dict[str, Any]:
        """Cohere v1 (``cohere.Client().embed``): floats as a list, or by type when ``embedding_types`` is given."""
        texts = body.all_texts()
        vectors, tokens = await self._embed(body.model, texts, None, "dimensions")
        return cohere_embed.response(vectors, texts, tokens, body.embedding_types, version="1")

    async def _embed(self, model: str, texts: list[str], dimension: int | None,
                     field: str, max_tokens: int | None = None) -> tuple[np.ndarray, int]:
        """The texts' vectors from the model's deployment and the tokens read; a 422 naming ``field`` when a
        ``dimension`` is asked that the model does not give, and one naming ``max_tokens`` (Cohere's) when it asks to
        cut the texts shorter than the model reads them."""
        card = self._card(model, "embedding")
        await self._usable(card)
        handle = self.handles[card.deployment]
        if dimension is not None or max_tokens is not None:
            info = await self._call(handle.info.remote(), card)
            check_cut(card, info, "max_tokens", max_tokens)
            if dimension is not None and dimension != info["dimension"]:
                raise ApiError(422, f"{field}: model '{model}' gives {info['dimension']}-dimensional "
                               "embeddings; other sizes are not supported", param=field, code="invalid_value")
        result = await self._call(handle.embed.remote(texts), card)
        return np.asarray(result["vectors"], dtype=np.float32), int(result["tokens"])

    @app.post("/v1/chat/completions")
    async def chat_completions(self, body: chat.ChatRequest, request: Request) -> Any:
        """OpenAI's chat completions (streaming or not) from a served language model or a flow that answers
        (``rag``: the answer with its numbered sources); ``chat.chat_target`` decides where a ``model`` goes."""
        owner = routes_tasks.tenant(request)
        target = await asyncio.to_thread(chat.chat_target, body.model, self.by_name, owner)
        if isinstance(target, ModelCard):
            await self._usable(target)
            return await chat.chat_response(self.handles[target.deployment], target, body)
        return await chat_flows.flow_response(target, body, owner)

    @app.post("/v2/chat")
    async def chat_v2(self, body: cohere_chat.CohereChatRequest, request: Request) -> Any:
        """Cohere v2 (``cohere.ClientV2().chat`` / ``chat_stream``) from a served language model or a flow that
        answers, whose sources become ``citations``."""
        owner = routes_tasks.tenant(request)
        target = await asyncio.to_thread(chat.chat_target, body.model, self.by_name, owner)
        handle = None
        if isinstance(target, ModelCard):
            await self._usable(target)
            handle = self.handles[target.deployment]
        return await cohere_chat.respond(body, target, handle, owner)

    @app.post("/v1/rerank")
    async def rerank(self, body: RerankRequest) -> dict[str, Any]:
        """Cohere v1 and Jina: ``results`` best first, ``usage`` with the tokens read."""
        results, tokens = await self._rank(body, with_documents=body.return_documents)
        return RerankResponse(id=str(uuid.uuid4()), results=results, model=body.model,
                              usage={"total_tokens": tokens, "search_units": 1}).model_dump(exclude_none=True)

    @app.post("/v2/rerank")
    async def rerank_v2(self, body: RerankV2Request) -> dict[str, Any]:
        """Cohere v2 (``cohere.ClientV2().rerank``): ``results`` best first, ``meta`` with billed units."""
        results, tokens = await self._rank(body, with_documents=body.return_documents)
        meta: dict[str, Any] = {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}
        if tokens is not None:
            meta["tokens"] = {"input_tokens": tokens, "output_tokens": 0}
        return RerankV2Response(id=str(uuid.uuid4()), results=results, meta=meta).model_dump(exclude_none=True)

    async def _rank(self, body: RerankBody, *, with_documents: bool) -> tuple[list[RerankResult], int | None]:
        """The body's documents ranked by the model's raw scores, best first (ties in input order), and tokens."""
        card = self._card(body.model, "rerank")
        await self._usable(card)
        if getattr(body, "max_tokens_per_doc", None) is not None:  # Cohere v2's
            info = await self._call(self.handles[card.deployment].info.remote(), card)
            check_cut(card, info, "max_tokens_per_doc", body.max_tokens_per_doc)
        texts = body.texts()
        scores, tokens = np.zeros(0), 0
        if texts:
            result = await self._call(self.handles[card.deployment].score.remote(body.query, texts), card)
            scores, tokens = np.asarray(result["scores"], dtype=np.float64), result["tokens"]
        order = np.lexsort((np.arange(len(scores)), -scores))[: body.top_n]
        shown = body.shown() if with_documents else None
        results = [RerankResult(index=int(i), relevance_score=float(scores[i]),
                                document=shown[i] if shown else None) for i in order]
        return results, tokens

    @staticmethod
    async def _call(response: Any, card: ModelCard) -> dict[str, Any]:
        try:
            return await response
        except Exception as err:  # noqa: BLE001  (a model failure is the server's: named, details in the log)
            what = f"model '{card.id}' (deployment '{card.deployment}')"
            raise errors.unavailable(what, err) or errors.server_error(what, err, code="model_error") from None

