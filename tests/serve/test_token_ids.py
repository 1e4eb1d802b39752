"""/v1/embeddings' token-id inputs (OpenAI's API takes them; LangChain's OpenAIEmbeddings sends them by default) are
read back as the texts they encode in cl100k_base, offline, from the encoding file litellm ships. No Ray: the body's
parsing alone; the served embeddings of such a body are in test_model_api.py."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from serve import token_ids
from serve.schemas import EmbeddingsRequest

TEXTS = ["Which insects make honey?", "Bees — and some wasps — store nectar as honey.", "naïve café 蜂蜜"]


@pytest.fixture(scope="module")
def cl100k():
    token_ids.decode([0])  # loads the encoding as the service does (tiktoken's cache: litellm's bundled file)
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def test_token_ids_are_read_as_the_texts_they_encode(cl100k):
    ids = cl100k.encode_ordinary_batch(TEXTS)
    assert EmbeddingsRequest(model="minilm", input=ids).texts() == TEXTS
    assert EmbeddingsRequest(model="minilm", input=ids[2]).texts() == [TEXTS[2]]
    assert EmbeddingsRequest(model="minilm", input=TEXTS).texts() == TEXTS  # texts stay texts


@pytest.mark.parametrize("value, said", [
    ([[101, 200_000]], "token id 200000 of text 0 is not one of cl100k_base's"),
    ([5, -1], "token id -1 is not one of cl100k_base's"),
    ([100256], "token id 100256 is not one of cl100k_base's"),  # inside the range, but an id the encoding leaves unused
    ([[9906], [1917, 100270]], "token id 100270 of text 1 is not one of cl100k_base's"),  # (a KeyError, a 500, before)
    (["bees", [101]], "mixes texts and token ids"),
    ([[101], []], "mixes texts and token ids, or holds an empty token-id array"),
])
def test_ids_that_are_not_cl100k_text_are_a_422_naming_input(value, said):
    with pytest.raises(ValidationError) as refused:
        EmbeddingsRequest(model="minilm", input=value)
    [error] = refused.value.errors()
    assert error["loc"] == ("input",) and said in error["msg"], error


def test_ids_that_cut_a_character_in_half_are_refused_not_replaced(cl100k):
    half = cl100k.encode_single_token(b"\xc3")  # the first byte of "é" on its own
    with pytest.raises(ValidationError, match="not whole UTF-8 text"):
        EmbeddingsRequest(model="minilm", input=[half])
    whole = cl100k.encode_ordinary("é")
    assert EmbeddingsRequest(model="minilm", input=whole).texts() == ["é"]
