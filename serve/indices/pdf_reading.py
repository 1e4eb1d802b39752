"""An uploaded PDF's pages, read in a child process within a time and a memory limit.

Why: pypdf reads a page's text by running its content stream, and a file of a few hundred KB can hold
compressed streams that take minutes and gigabytes to run. Read in the ingress replica, such a file held a core
and a growing gigabyte for as long as it ran (13 minutes and counting), and its request never answered. In a
child process it is stopped at the limit, and the upload is a 422 naming the file. A file with more pages than
an upload may add documents is refused before any page is read, with its page count, unless a part of it is asked
for (``first_page``: the web UI sends a long PDF in parts).

The child is started with ``spawn`` (a fork of the replica, with its threads, could deadlock) and imports only
this module and pypdf; starting it costs about half a second, once per PDF.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

#: Address space the child may use: far above what a real document needs.
MEMORY_BYTES = 2 << 30


def pdf_pages(content: bytes, filename: str, *, seconds: float, max_pages: int,
              first_page: int | None = None) -> tuple[str | None, list[str]]:
    """``read_pdf``'s title and page texts of ``content`` (from ``first_page``, at most ``max_pages`` of them); a
    ``SourceError`` naming ``filename`` when the file is no PDF, has more than ``max_pages`` pages and no
    ``first_page`` (a ``TooManyPages``, with its count), or takes longer than ``seconds`` or more than
    ``MEMORY_BYTES``."""
    from operators.errors import SourceError
    from operators.sources.pdf import TooManyPages

    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_read, args=(sender, content, filename, max_pages, first_page), daemon=True,
                            name="tessera-pdf")
    child.start()
    sender.close()
    try:
        if not receiver.poll(seconds):
            raise SourceError(f"{filename}: reading its text took more than {seconds:g} s (max_pdf_seconds), so it "
                              "was stopped; a PDF whose pages draw that much is not indexed")
        try:
            kind, value = receiver.recv()
        except EOFError:  # the child died: out of memory, or killed
            raise SourceError(f"{filename}: reading its text needed more than {MEMORY_BYTES >> 30} GiB of memory, "
                              "so it was stopped") from None
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receiver.close()
    if kind == "error":
        message, field = value
        raise SourceError(message, field=field)
    if kind == "too_many_pages":
        raise TooManyPages(*value)
    return value


def _read(sender: Any, content: bytes, filename: str, max_pages: int, first_page: int | None) -> None:
    """In the child: the pages, or the error's message, sent back."""
    import io
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    from operators.errors import SourceError
    from operators.sources.pdf import TooManyPages, read_pdf

    try:
        sender.send(("pages", read_pdf(io.BytesIO(content), name=filename, max_pages=max_pages,
                                       first_page=first_page)))
    except TooManyPages as err:
        sender.send(("too_many_pages", (err.message, err.pages)))
    except SourceError as err:
        sender.send(("error", (err.message, err.field)))
    except MemoryError:
        sender.send(("error", (f"{filename}: reading its text needed more than {MEMORY_BYTES >> 30} GiB of memory",
                               None)))
    finally:
        sender.close()
