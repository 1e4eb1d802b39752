"""Cohere's ``max_tokens`` (``/v2/embed``) and ``max_tokens_per_doc`` (``/v2/rerank``) ask to cut each text at that
many tokens. The served models cut only at their own length, so a smaller value was ignored: ``max_tokens: 5`` gave
the vector of the whole text. Now it is a 422 naming the field and the model's length; at or above that length (the
client's 4,096) it asks for nothing more and is taken. The ingress's own handlers (``serve.api.ModelAPI``); the
model deployments stand in as handles that answer ``info`` as a replica does (``HostedOperator.info``'s
``max_tokens``), since a real one needs Ray and a model (tests/serve/test_model_api.py checks them on the app)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from serve.http.errors import ApiError
from serve.schemas import ModelCard, RerankV2Request
from serve.cohere_embed import CohereEmbedRequest


class Method:
    def __init__(self, answer: Any) -> None:
        self.answer = answer

    def remote(self, *args: Any) -> Any:
        async def answered() -> Any:
            return self.answer(*args)
        return answered()


class Replica:
    """What the ingress calls on a deployment handle: ``info`` as a replica of a model reading 256 tokens answers."""

    def __init__(self) -> None:
        self.info = Method(lambda: {"dimension": 3, "max_tokens": 256})
        self.embed = Method(lambda texts: {"vectors": [[0.6, 0.8, 0.0]] * len(texts), "tokens": len(texts)})
        self.score = Method(lambda query, texts: {"scores": [0.5] * len(texts), "tokens": len(texts)})


@pytest.fixture
def ingress():
    from serve.api import ModelAPI

    api = object.__new__(ModelAPI.func_or_class)
    api.handles = {"minilm": Replica(), "rr": Replica()}
    api.cards = [ModelCard(id="minilm", type="embedding", operator="embed.sentence_transformer", deployment="minilm",
                           status="ready"),
                 ModelCard(id="rr", type="rerank", operator="rerank.embedding", deployment="rr", status="ready")]
    api.by_name = {card.id: card for card in api.cards}

    async def usable(card: ModelCard) -> None:
        return None

    api._usable = usable  # (Serve's status of the deployment: none here)
    return api


def embed(api, **fields: Any) -> dict[str, Any]:
    body = CohereEmbedRequest(model="minilm", texts=["bees make honey"], input_type="search_document", **fields)
    return asyncio.run(api.embed_v2(body))


def rerank(api, **fields: Any) -> dict[str, Any]:
    body = RerankV2Request(model="rr", query="honey", documents=["bees make honey", "ants"], **fields)
    return asyncio.run(api.rerank_v2(body))


@pytest.mark.parametrize("call, field", [(embed, "max_tokens"), (rerank, "max_tokens_per_doc")])
def test_a_cut_shorter_than_the_model_reads_is_a_422_naming_the_field(ingress, call, field):
    with pytest.raises(ApiError) as err:
        call(ingress, **{field: 5})
    assert (err.value.status, err.value.param, err.value.code) == (422, field, "invalid_value")
    assert "reads up to 256 tokens" in err.value.message and "send 256 or more" in err.value.message


@pytest.mark.parametrize("value", [256, 4096, None])
def test_a_cut_at_or_past_the_model_s_length_is_taken(ingress, value):
    assert rerank(ingress, max_tokens_per_doc=value)["results"]
    # the vectors /v2/embed's handler gets (its response's encoding is sentence-transformers', slow to import)
    vectors, _ = asyncio.run(ingress._embed("minilm", ["bees make honey"], None, "output_dimension", value))
    assert vectors.shape == (1, 3)
