"""What an upload over ``max_upload_bytes`` held, for its 413: the files its multipart form named as it streamed in.

The 413 said "the request body is over the limit max_upload_bytes=20000000" and no more: someone who sent a few
files could not tell which was too large, or by how much. The body limit (``serve.security.auth.BodyLimit``) now
passes the bytes it counts through python-multipart's parser as well, which notes each file part's name and how many
bytes of it came, keeping none of them; a body whose ``Content-Length`` is over the limit is read up to
``PEEK_BYTES`` for its first files' names, then refused.
"""

from __future__ import annotations

from python_multipart.multipart import MultipartParser, parse_options_header

#: How much of a body whose Content-Length is over the limit is read, for the names of its first files, before
#: the 413: a form's first file part's header is at its start.
PEEK_BYTES = 1 << 16


class UploadParts:
    """The file parts of a multipart body as it streams past (``feed``): ``[name, bytes seen, whole]`` each."""

    def __init__(self, content_type: str) -> None:
        kind, options = parse_options_header(content_type)
        boundary = options.get(b"boundary")
        self.files: list[list] = []
        self._field, self._headers, self._part = b"", {}, None
        self._parser = None
        if kind == b"multipart/form-data" and boundary:
            self._parser = MultipartParser(boundary, {
                "on_part_begin": self._begin, "on_header_begin": self._header_begin,
                "on_header_field": self._header_field, "on_header_value": self._header_value,
                "on_headers_finished": self._headers_done, "on_part_data": self._data, "on_part_end": self._end})

    def feed(self, data: bytes) -> None:
        if self._parser is None or not data:
            return
        try:
            self._parser.write(data)
        except Exception:  # noqa: BLE001  (a form it cannot read names no more files; the form reader says why)
            self._parser = None

    def _begin(self) -> None:
        self._field, self._headers, self._part = b"", {}, None

    def _header_begin(self) -> None:
        self._field = b""

    def _header_field(self, data: bytes, start: int, end: int) -> None:
        self._field += data[start:end]

    def _header_value(self, data: bytes, start: int, end: int) -> None:
        key = self._field.lower()
        self._headers[key] = self._headers.get(key, b"") + data[start:end]

    def _headers_done(self) -> None:
        disposition = self._headers.get(b"content-disposition", b"")
        _, options = parse_options_header(disposition)
        name = options.get(b"filename")
        if name is not None:
            self._part = [name.decode("utf-8", "replace"), 0, False]
            self.files.append(self._part)

    def _data(self, data: bytes, start: int, end: int) -> None:
        if self._part is not None:
            self._part[1] += end - start

    def _end(self) -> None:
        if self._part is not None:
            self._part[2] = True
        self._part = None


def over_limit_message(limit: int, declared: int | None, files: list[list]) -> str:
    """The 413's message: the request's size where its Content-Length says it, each file the form named so far with
    its size (at least, for one that was still coming), and the limit."""
    said = [f"the request is {declared:,} bytes (its Content-Length)"] if declared is not None else []
    cut = "the rest was not read" if declared is not None else "the limit stopped it there"
    named = [f"'{name}' ({size:,} bytes)" if whole else f"'{name}' (at least {size:,} bytes: {cut})"
             for name, size, whole in files]
    if named:
        said.append(("files " if len(named) > 1 else "file ") + ", ".join(named))
    return (f"files: the upload is over the limit max_upload_bytes={limit} ({limit:,} bytes of files and their form "
            f"a request){': ' + '; '.join(said) if said else ''}; send fewer or smaller files a request")
