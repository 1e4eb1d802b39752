"""Secret hygiene: remembered values and secret-shaped text are masked in text and in every log record."""

from __future__ import annotations

import logging

import pytest

from operators.redact import MASK, RedactingFilter, install_log_redaction, redact, remember_secret

KEY = "tk-redact-test-5f2b9c1e7a"


@pytest.mark.parametrize("text, kept", [
    ("Authorization: Bearer abcdef123456", "Authorization: Bearer ***"),
    ("{'Authorization': 'Bearer abcdef123456'}", "{'Authorization': 'Bearer ***'}"),
    ('"authorization": "Basic dXNlcjpwYXNz"', '"authorization": "Basic ***"'),
    ("sent bearer eyJhbGciOi.payload.sig to x", "sent bearer *** to x"),
    ("GET /search?q=bees&pw=hunter22&limit=5", "GET /search?q=bees&pw=***&limit=5"),
    ("https://h/x?api_key=abc&token=def#f", "https://h/x?api_key=***&token=***#f"),
    ("http://admin:s3cret@mosaic.internal/search", "http://***@mosaic.internal/search"),
    ("nothing to hide: keyboard=1&monkey=2", "nothing to hide: keyboard=1&monkey=2"),
])
def test_secret_shapes_are_masked(text, kept):
    assert redact(text) == kept


def test_a_remembered_value_is_masked_wherever_it_appears():
    remember_secret(KEY)
    assert redact(f"401: invalid key {KEY}!") == f"401: invalid key {MASK}!"
    assert redact(f"{{'x-api-key': '{KEY}'}}") == f"{{'x-api-key': '{MASK}'}}"
    remember_secret("abc")  # too short to mask without garbling every message
    assert redact("abc") == "abc"


def test_every_log_record_is_redacted_once_installed(caplog):
    remember_secret(KEY)
    install_log_redaction()
    install_log_redaction()  # idempotent: one wrapper
    logger = logging.getLogger("some.library")
    with caplog.at_level(logging.DEBUG):
        logger.debug("headers %s", {"X-Api-Key": KEY})
        logger.info("GET %s", "https://mosaic/search?q=x&pw=hunter22")
        try:
            raise RuntimeError(f"the server said: bad key {KEY}")
        except RuntimeError:
            logger.exception("call failed")
    text = caplog.text
    assert KEY not in text and "hunter22" not in text
    assert "{'X-Api-Key': '***'}" in text and "pw=***" in text and "bad key ***" in text


def test_the_filter_redacts_records_made_elsewhere():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "key=%s auth %s", ("v", "Bearer abcdef123456"), None)
    assert RedactingFilter().filter(record) is True
    assert record.getMessage() == "key=v auth Bearer ***"
