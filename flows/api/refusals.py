"""How the Python API refuses an index it cannot open: in a Python caller's words, naming the argument and the
``ingest(...)`` call that resumes, where the engine's errors say the ``tessera`` command or name no argument.

Why a module of its own: ``Index`` and ``Flow.load`` (``flows.api.flow_and_index``) both open indices and refuse
them alike.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from operators.errors import TesseraError, short_repr


@contextlib.contextmanager
def resume_said() -> Iterator[None]:
    """An index folder whose first ingestion was interrupted refused with the ``ingest(...)`` call that resumes it
    (``first_ingest.with_resume``; the CLI says its command), not only that "the command that started it" does."""
    from operators.store.errors import UnfinishedFirstIngestError

    try:
        yield
    except UnfinishedFirstIngestError as err:
        from flows.ingestion.first_ingest import with_resume

        raise with_resume(err, python=True)


def not_an_index(call: str, given: Any) -> TesseraError:
    """``Index(x)``'s and ``Index.open(x)``'s refusal of an ``x`` that is no index: the same error from both (it was a
    ``SpecError`` from one, an ``IndexStoreError`` from the other), naming ``path`` and what it got."""
    from operators.store.errors import IndexArgumentError

    return IndexArgumentError(f"{call} takes an index's folder (a path) or name, or an open Index; got "
                              f"{type(given).__name__} {short_repr(given)}", field="path")
