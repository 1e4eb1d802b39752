"""Whether a ``--queries`` argument (or ``Flow.run``'s) names a queries file or folder, or is a query's text."""

from __future__ import annotations

import os

from operators.path_access import windows_path

QUERY_SUFFIXES = (".jsonl", ".ndjson", ".json", ".tsv", ".txt", ".parquet", ".csv")


def looks_like_path(source: str) -> bool:
    """Whether ``source`` is taken for a file's or folder's name, not a query's text: a Windows path, with spaces
    (``C:\\Users\\me\\My Documents\\q.tsv``) or no suffix (``C:\\data\\scifact``); no whitespace, and a queries
    file's suffix or a folder separator; or, whitespace and all, a ``file://``, ``s3://`` or ``gs://`` URI, a path
    from a folder (``/``, ``~/``, ``./``, ``../``) to such a suffix or a separator, or one that is there:
    ``/home/Zoë Smith/queries.jsonl`` and ``"my data/beir/"`` were searched as a query's text, the file unread."""
    text = source.strip()
    if text and windows_path(text) is not None:
        return True
    named = text.lower().endswith(QUERY_SUFFIXES) or os.sep in text
    if not text or not named:
        return False
    if text.lower().startswith(("file://", "s3://", "gs://", "gcs://")):  # a URI, its path's spaces and all
        return True
    if not any(ch.isspace() for ch in text):
        return True
    return text.startswith(("/", "~/", "./", "../")) and text.lower().endswith((*QUERY_SUFFIXES, os.sep)) or \
        _is_there(text)


def _is_there(text: str) -> bool:
    try:
        return os.path.lexists(os.path.expanduser(text))
    except (OSError, ValueError):  # a name too long for a path; a NUL in it
        return False
