"""What the client of an upload is told of how a file of it was read: the service's log is not read by whoever sent
the file. One wording for text, Markdown and HTML files (``serve.indices.documents``) and CSV files
(``serve.indices.csv_upload``)."""

from __future__ import annotations


def encoding_warning(filename: str, guessed: str | None, stray: tuple[int | None, int] | None) -> str | None:
    """What the client is told of a file that is not UTF-8: the encoding ``guessed`` for it, else a byte that is not
    UTF-8 in UTF-8 text (``stray``: its offset in the file, None where the reader knows only its line, and its
    value), read as U+FFFD as tessera ingest warns; None for UTF-8 text."""
    if guessed is not None:
        return (f"{filename}: not UTF-8; read as {guessed}, the encoding guessed for it (if its text looks wrong, "
                "save it as UTF-8 and send it again)")
    if stray is None:
        return None
    at, value = stray
    where = "" if at is None else f" at byte {at + 1}"
    return (f"{filename}: UTF-8 text with a byte that is not UTF-8 (0x{value:02x}{where}): read as UTF-8, each such "
            "byte as U+FFFD (if its text looks wrong, save it as UTF-8 and send it again)")
