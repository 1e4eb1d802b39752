"""How long a query may be, in the CLI and in Python (the service has its own setting, ``max_query_chars``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from operators.env_numbers import env_count
from operators.errors import SpecError

if TYPE_CHECKING:
    import pyarrow as pa

#: The longest query, in characters: the service's default ``max_query_chars`` (serve/service_settings.py). A query is
#: searched for, not read: BM25 and the encoders spend time on every word of it, so a file's 5 MB line (a document
#: pasted by mistake) is refused, naming its line, before anything runs. ``TESSERA_MAX_QUERY_CHARS`` sets another.
MAX_QUERY_CHARS = 10_000
MAX_QUERY_CHARS_ENV = "TESSERA_MAX_QUERY_CHARS"


def max_query_chars() -> int:
    """``MAX_QUERY_CHARS``, or ``$TESSERA_MAX_QUERY_CHARS`` when set (a whole number above 0)."""
    return env_count(MAX_QUERY_CHARS_ENV, MAX_QUERY_CHARS)


def check_length(text: str, which: str, longest: int) -> None:
    if len(text) > longest:
        raise SpecError(f"{which} has {len(text)} characters, over the limit of {longest} for a query (a query is "
                        f"searched for, not read; {MAX_QUERY_CHARS_ENV} sets another)", field="queries")


def check_query_lengths(queries: "pa.Table") -> None:
    """``max_query_chars`` on a ``qid, query`` table given in Python (``Flow.run``), naming the first query over it;
    without a Python string per row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    longest = max_query_chars()
    if not queries.num_rows or "query" not in queries.column_names:
        return
    lengths = pc.fill_null(pc.utf8_length(pc.cast(queries.column("query"), pa.string())), 0)
    over = pc.index(pc.greater(lengths, longest), True).as_py()
    if over >= 0:
        qid = queries.column("qid")[over].as_py() if "qid" in queries.column_names else over + 1
        check_length(queries.column("query")[over].as_py(), f"query '{qid}' (row {over + 1})", longest)
