"""An uploaded PDF's pages, read in a child process within a time and a memory limit.

Why: pypdf reads a page's text by running its content stream, and a file of a few hundred KB can hold
compressed streams that take minutes and gigabytes to run. Read in the ingress replica, such a file held a core
and a growing gigabyte for as long as it ran (13 minutes and counting), and its request never answered. In a
child process it is stopped at the limit, and the upload is a 422 naming the file. A file with more pages than
an upload may add documents is refused before any page is read.

The child is started with ``spawn`` (a fork of the replica, with its threads, could deadlock) and imports only
this module and pypdf; starting it costs about half a second, once per PDF.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

#: Address space the child may use: far above what a real document needs.
MEMORY_BYTES = 2 << 30


def pdf_pages(content: bytes, filename: str, *, seconds: float, max_pages: int) -> tuple[str | None, list[str]]:
    """``read_pdf``'s title and page texts of ``content``; a ``SourceError`` naming ``filename`` when the file is
    no PDF, has more than ``max_pages`` pages, or takes longer than ``seconds`` or more than ``MEMORY_BYTES``."""
    from operators.errors import SourceError

    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_read, args=(sender, content, filename, max_pages), daemon=True,
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
        raise SourceError(value)
    return value


def _read(sender: Any, content: bytes, filename: str, max_pages: int) -> None:
    """In the child: the pages, or the error's message, sent back."""
    import io
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    from operators.errors import SourceError
    from operators.sources.pdf import read_pdf

    try:
        sender.send(("pages", read_pdf(io.BytesIO(content), name=filename, max_pages=max_pages)))
    except SourceError as err:
        sender.send(("error", err.message))
    except MemoryError:
        sender.send(("error", f"{filename}: reading its text needed more than {MEMORY_BYTES >> 30} GiB of memory"))
    finally:
        sender.close()
