"""A grounding document whose text is empty (``""``, or ``{"text": ""}``) has no text: a 422 naming it, as a blank one
is (docs/serving.md), not a row whose text is the ``text: `` of the key/value fallback. Without Ray
(serve/chat/grounded.py's ``document_rows``, what /v2/chat calls)."""

from __future__ import annotations

import pytest

from serve.http.errors import ApiError
from serve.chat.grounded import CohereDocument, document_rows


@pytest.mark.parametrize("sent, param", [
    ([""], "documents.0"),
    (["fine", ""], "documents.1"),
    ([CohereDocument(id="e", data={"text": ""})], "documents.0"),
    ([CohereDocument(id="e", data={"text": "", "year": 2024})], "documents.0"),
    ([CohereDocument(id="e", data={"snippet": "", "title": "T"})], "documents.0"),
    # invisible characters alone, which str.strip keeps: answered from as a document (a 200)
    (["\u200b"], "documents.0"),
    ([CohereDocument(id="e", data={"text": "\x00\ufeff"})], "documents.0"),
])
def test_a_document_with_empty_text_is_a_422_naming_it(sent, param):
    with pytest.raises(ApiError) as err:
        document_rows(sent)
    assert (err.value.status, err.value.param) == (422, param)
    assert err.value.message == f"{param} has no text"


def test_an_empty_text_field_gives_way_to_the_next_text_field_and_none_at_all_to_the_fields():
    rows, _ = document_rows([CohereDocument(id="a", data={"text": "", "snippet": "Snip."}),
                             CohereDocument(id="b", data={"author": "Ada", "year": 1843})])
    assert [row["text"] for row in rows] == ["Snip.", "author: Ada\nyear: 1843"]


def test_a_text_field_that_is_no_string_is_read_in_jsons_words():
    """As the fallback's fields are: ``str()`` gave an object as Python's repr and a boolean as ``True``."""
    rows, _ = document_rows([CohereDocument(id="a", data={"text": {"colour": "purple", "sizes": [1, 2]}}),
                             CohereDocument(id="b", data={"content": True}), CohereDocument(id="c", data={"body": 7})])
    assert [row["text"] for row in rows] == ['{"colour": "purple", "sizes": [1, 2]}', "true", "7"]
