"""Keep secrets out of logs and error messages: known secret values, and text shaped like one, become ``***``.

Two layers. Values: an operator that reads a key calls ``remember_secret(key)``, and from then on the exact
value is masked wherever ``redact`` runs, whatever surrounds it (a server that echoes the key in an error
body, a traceback). Shapes: ``Authorization:``/``Bearer`` tokens, ``user:password@`` in URLs and query
parameters named like secrets (``pw``, ``key``, ``api_key``, ``token``, ``password``, ...; MOSAIC passes its
password as ``pw=``) are masked even when nobody remembered them (urllib3 logs request URLs at DEBUG).

Logs: ``install_log_redaction()`` wraps the log record factory, so every record of this process, whichever
logger and handler it goes to, carries a redacted message (and traceback); ``remember_secret`` installs it.
Processes that configure logging (the CLI, the service) call it at start; ``RedactingFilter`` is the same as a
``logging.Filter`` for a handler configured by ``dictConfig``.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

MASK = "***"
#: Secrets shorter than this are not remembered: masking "a" everywhere would garble every message.
MIN_SECRET_LENGTH = 6
_SECRET_PARAMS = r"pw|pwd|pass|passwd|password|secret|token|access_token|refresh_token|id_token|api_key|apikey|" \
                 r"api-key|key|auth|signature|sig|x-amz-signature|client_secret"
_SHAPES = (
    (re.compile(r"(?i)\b(authorization[\"']?\s*[:=]\s*[\"']?)(?:(bearer|basic|token)\s+)?[^\s\"',;}]+"),
     lambda m: f"{m.group(1)}{m.group(2) + ' ' if m.group(2) else ''}{MASK}"),
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{6,}"), lambda m: f"{m.group(1)}{MASK}"),
    (re.compile(rf"(?i)([?&;](?:{_SECRET_PARAMS})=)[^&#\s\"']+"), lambda m: f"{m.group(1)}{MASK}"),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@]*:[^/\s@]+@"), lambda m: f"{m.group(1)}{MASK}@"),
)

_secrets: set[str] = set()
_lock = threading.Lock()
_installed = False


def remember_secret(value: str | None) -> None:
    """Mask ``value`` in every log record and ``redact`` call of this process from now on."""
    if value and len(value) >= MIN_SECRET_LENGTH:
        with _lock:
            _secrets.add(value)
    install_log_redaction()


def redact(text: str) -> str:
    """``text`` with remembered secrets and secret-shaped parts replaced by ``***``."""
    for secret in sorted(_secrets, key=len, reverse=True):  # longest first: one secret may contain another
        if secret in text:
            text = text.replace(secret, MASK)
    for pattern, replace in _SHAPES:
        text = pattern.sub(replace, text)
    return text


def redact_record(record: logging.LogRecord) -> logging.LogRecord:
    """Replace the record's message (and traceback text) by their redacted forms, in place."""
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001  (a malformed record is logging's to report, not ours)
        return record
    clean = redact(message)
    if clean != message:
        record.msg, record.args = clean, ()
    if record.exc_info and not record.exc_text:
        text = logging.Formatter().formatException(record.exc_info)
        clean = redact(text)
        if clean != text:
            record.exc_text = clean
    return record


class RedactingFilter(logging.Filter):
    """A handler filter that redacts every record it sees (for logging configured by ``dictConfig``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        redact_record(record)
        return True


def install_log_redaction() -> None:
    """Redact every log record this process creates, from now on (idempotent)."""
    global _installed
    with _lock:
        if _installed:
            return
        make_record = logging.getLogRecordFactory()

        def redacting_factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            return redact_record(make_record(*args, **kwargs))

        logging.setLogRecordFactory(redacting_factory)
        _installed = True
