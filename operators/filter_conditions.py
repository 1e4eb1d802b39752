"""The Arrow side of a metadata filter's conditions, with no filter model: one compiled condition with its words
(``Condition``), the bounds a period or a day compares as (``period_bound``, ``day_bound``), the list column a
spatial condition also reads (``LISTS``, ``listed``), whether a column casts to text, and the join of
expressions. Apart from ``filters`` so that the model (its keys, its checks, how it compiles) reads alone."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field as dc_field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from operators.filter_values import holds_text_lists, shown


def period_bound(column: pc.Expression, day: str) -> pc.Expression:
    """An ISO string column with a plain year (``2021``, as ``analyze.dimensions`` writes one) or year and month
    (``2021-05``) read as its period's first day (``day`` "01") or past its last (``day`` "99", which sorts after
    every day of it): as text, "2021" sorted before "2021-01-01", and the year filter skipped it. The period
    overlaps the range, as an integer-year column's year does."""
    length = pc.utf8_length(column)
    return pc.if_else(length == 4, pc.binary_join_element_wise(column, f"-{day}-{day}", ""),
                      pc.if_else(length == 7, pc.binary_join_element_wise(column, f"-{day}", ""), column))


#: The list column a spatial condition reads beside its own (``analyze.dimensions`` writes both).
LISTS = {"country": "countries", "region": "regions"}


def listed(schema: pa.Schema, column: str) -> bool:
    """Whether ``schema`` has ``column``'s list column (``LISTS``) of lists of text (``analyze.dimensions``' every
    country, or region, of a document, ``country``/``region`` the first): a condition on ``column`` then matches
    any of them. Without one (indices from before it, or whose list column holds something else), ``column``
    alone is read."""
    name = LISTS[column]
    return name in schema.names and holds_text_lists(schema.field(name).type)


def join(parts: list[pc.Expression], how: str) -> pc.Expression:
    out = parts[0]
    for part in parts[1:]:
        out = (out & part) if how == "and" else (out | part)
    return out


@dataclass(frozen=True)
class Condition:
    """One condition of a filter: the column it reads, the condition as its author wrote it (``{field: year, gte:
    2010}``, ``{region: 'EU'}``), the value's type in words, and its Arrow expression."""

    column: str
    written: str
    kind: str
    expression: pc.Expression = dc_field(repr=False, compare=False)

    @classmethod
    def of(cls, column: str, keys: dict[str, Any], kind: str, expression: pc.Expression) -> "Condition":
        """A condition on ``field: column`` with these keys and values."""
        pairs = ", ".join(f"{key}: {shown(value)}" for key, value in keys.items())
        return cls(column, f"{{field: {column}, {pairs}}}", kind, expression)


def day_bound(day: dt.date, kind: pa.DataType) -> pa.Scalar:
    """The first instant of ``day`` as a scalar comparable with a column of type ``kind``."""
    if pa.types.is_timestamp(kind):
        moment = dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc if kind.tz else None)
        return pa.scalar(moment, kind)
    if pa.types.is_date(kind):
        return pa.scalar(day, kind)
    return pa.scalar(day.isoformat(), kind)  # ISO strings sort like the dates they spell


def casts_to_string(kind: pa.DataType) -> bool:
    """Whether Arrow casts a column of ``kind`` to text (not a list, struct or map)."""
    try:
        pa.array([], kind).cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False
    return True
