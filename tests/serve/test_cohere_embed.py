"""Cohere's embed API on the package's Serve app, with the real clients: ``cohere.ClientV2().embed`` on ``/v2/embed``
(every embedding type, each checked against the encoder in-process) and ``cohere.Client().embed`` on ``/v1/embed``;
bodies it cannot serve are 422s naming the field."""

from __future__ import annotations

import base64

import numpy as np
import pytest
import requests

from operators import create
from operators.testing import sample_documents

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return sample_documents(5).column("text").to_pylist()


@pytest.fixture(scope="module")
def expected(texts) -> np.ndarray:
    op = create("embed.sentence_transformer", {})
    op.ensure_setup()
    return op.encode(texts)


def test_the_cohere_v2_client_gets_every_embedding_type(serve_app, texts, expected):
    import cohere

    client = cohere.ClientV2(api_key="x", base_url=serve_app)
    types = ["float", "int8", "uint8", "binary", "ubinary", "base64"]
    response = client.embed(model="all-MiniLM-L6-v2", texts=texts, input_type="search_document",
                            embedding_types=types)
    got = response.embeddings
    np.testing.assert_allclose(np.array(got.float_), expected, atol=1e-5)
    step = 2 / 255  # int8 and uint8: [-1, 1] in 256 codes, the same for every text
    np.testing.assert_allclose(((np.array(got.int8) + 128) * step - 1), expected, atol=step)
    np.testing.assert_allclose(np.array(got.uint8) * step - 1, expected, atol=step)
    signs = np.packbits(expected > 0, axis=-1).astype(int)
    assert np.array_equal(np.array(got.ubinary), signs) and np.array_equal(np.array(got.binary), signs - 128)
    decoded = np.stack([np.frombuffer(base64.b64decode(b), dtype="<f4") for b in got.base64])
    np.testing.assert_allclose(decoded, expected, atol=1e-5)
    assert response.texts == texts and response.meta.billed_units.input_tokens > len(texts)
    assert response.response_type == "embeddings_by_type" and response.meta.api_version.version == "2"

    alone = client.embed(model="minilm", inputs=[{"content": [{"type": "text", "text": texts[0]}]}],
                         input_type="search_query")  # an alias, inputs of text parts, floats by default
    np.testing.assert_allclose(np.array(alone.embeddings.float_[0]), expected[0], atol=1e-5)
    assert alone.embeddings.int8 is None


def test_the_cohere_v1_client_gets_floats(serve_app, texts, expected):
    import cohere

    client = cohere.Client(api_key="x", base_url=serve_app)
    response = client.embed(model="all-MiniLM-L6-v2", texts=texts, input_type="search_query")
    assert response.response_type == "embeddings_floats"
    np.testing.assert_allclose(np.array(response.embeddings), expected, atol=1e-5)
    typed = client.embed(model="all-MiniLM-L6-v2", texts=texts[:1], embedding_types=["ubinary"])
    assert typed.response_type == "embeddings_by_type" and typed.embeddings.ubinary[0] == \
        np.packbits(expected[0] > 0).tolist()
    with pytest.raises(cohere.errors.NotFoundError):
        client.embed(model="embed-english-v3.0", texts=["x"])


@pytest.mark.parametrize("path, body, field", [
    ("/v2/embed", {"input_type": "image", "texts": ["x"]}, "input_type"),
    ("/v2/embed", {"input_type": "search_query", "images": ["data:image/png;base64,AAAA"], "texts": ["x"]},
     "images"),
    ("/v2/embed", {"input_type": "search_query", "texts": ["x"], "output_dimension": 128}, "output_dimension"),
    ("/v2/embed", {"input_type": "search_query", "texts": ["x"], "truncate": "START"}, "truncate"),
    ("/v2/embed", {"input_type": "search_query", "texts": ["x"], "embedding_types": ["float16"]},
     "embedding_types.0"),
    ("/v2/embed", {"texts": ["x"]}, "input_type"),
    ("/v1/embed", {"texts": []}, "texts"),
    ("/v1/embed", {"texts": ["\ud83d"]}, "texts.0"),
])
def test_bodies_it_cannot_serve_name_the_field(serve_app, path, body, field):
    response = requests.post(serve_app + path, json={"model": "all-MiniLM-L6-v2", **body}, timeout=60)
    assert response.status_code == 422, response.text
    assert (response.json()["error"]["param"], response.json()["error"]["code"]) == (field, "invalid_value")


def test_texts_and_inputs_together_or_neither_are_refused(serve_app):
    for extra in ({}, {"texts": ["x"], "inputs": [{"content": [{"type": "text", "text": "x"}]}]}):
        response = requests.post(serve_app + "/v2/embed", json={"model": "all-MiniLM-L6-v2",
                                                                "input_type": "search_query", **extra}, timeout=60)
        assert response.status_code == 422 and "exactly one of texts and inputs" in response.json()["error"]["message"]
