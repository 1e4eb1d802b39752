"""How a metadata filter's values meet a column's type (``operators.filters`` compiles the rest).

A number compares with a column of numbers as a number: as a double on a floating-point
column (an integer too large for int64 fits one), exactly on an integer column (a fraction
rounded the way that keeps the comparison, a value beyond the column type's range deciding
it alone); it never compares with a column of text (which would order it as text), nor does a
boolean (which would be the text 'true', never 'True' or 'yes'). Other values are cast to the
column's type. On a column null in every row, no condition matches.
A value that fits no comparison is a ``FilterError`` in the filter author's terms: the
condition as written, the value's type, the column's type and why.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from operators.errors import OperatorError, SpecError


class FilterError(SpecError, OperatorError):
    """A filter names a column the table or index does not have, or does not fit its type: the input is wrong
    (``except SpecError`` catches it, as the docs' pattern does), raised by a step as it runs."""


def shown(value: Any) -> str:
    """A value as a filter spells it: text quoted, dates as ISO days, lists in brackets."""
    if isinstance(value, list):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value.isoformat() if isinstance(value, dt.date) else value)


def kind_of(value: Any) -> str:
    """The type of a filter's value in the author's words."""
    if isinstance(value, list):
        return "a list of " + " and ".join(sorted({kind_of(v).split(" ", 1)[-1] for v in value}))
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    return "a date" if isinstance(value, dt.date) else "text"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _unfit(column: str, op: str, value: Any, kind: pa.DataType, why: str, written: Any = None) -> FilterError:
    """The error for ``value`` (of ``written``, the list it is in) that does not fit the column's type."""
    written = value if written is None else written
    return FilterError(f"filter {{field: {column}, {op}: {shown(written)}}}: value {shown(value)} does not fit "
                       f"column '{column}' of type {kind} ({kind_of(value)}; {why})", field="params.filter")


def _holds(kind: pa.DataType) -> str | None:
    """'text' or 'bytes' for a column of strings or of bytes (dictionary-encoded too), else None."""
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return "text"
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_binary_view(kind):
        return "bytes"
    return None


def _check_kinds(column: str, op: str, value: Any, kind: pa.DataType, written: Any = None) -> None:
    """Refuse a boolean for a column of numbers and a number for a column of booleans (Arrow would cast true to 1
    and 2 to true, a match the author did not mean), a number for a column of text (it would compare as text,
    character by character: gt 5 keeps 'abc' and drops '10'), a boolean for a column of text (it would compare as
    the text 'true', so eq true on 'True' or 'yes' silently matches nothing), and any value for a column of lists
    or records."""
    numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
    if isinstance(value, bool) and numeric:
        raise _unfit(column, op, value, kind, "the column holds numbers", written)
    if _is_number(value) and pa.types.is_boolean(kind):
        raise _unfit(column, op, value, kind, "the column holds true or false", written)
    if _is_number(value) and _holds(kind):
        raise _unfit(column, op, value, kind, f"the column holds {_holds(kind)}, compared character by character, "
                     "not as numbers ('10' sorts before '9'); to compare as text, quote the value: "
                     f"{shown(str(value))}", written)
    if isinstance(value, bool) and _holds(kind):
        raise _unfit(column, op, value, kind, f"the column holds {_holds(kind)}, not true or false: {shown(value)} "
                     f"would match only the text {shown(shown(value))}, not 'True', 'yes' or '1'; quote the value, "
                     "spelled as the column spells it, to compare it as text; unquoted, YAML reads yes, no, on, off, "
                     "true and false as booleans", written)
    if pa.types.is_nested(kind):
        raise _unfit(column, op, value, kind, "the column holds lists or records; comparisons need a column of "
                     "single values", written)


#: What an Arrow integer type can hold at all: int64's least to uint64's greatest.
_ARROW_INTEGERS = (-2 ** 63, 2 ** 64 - 1)


def _integer_range(kind: pa.DataType) -> tuple[int, int]:
    info = np.iinfo(kind.to_pandas_dtype())
    return int(info.min), int(info.max)


def _held(column: str, op: str, value: Any, kind: pa.DataType, written: Any = None) -> None:
    """Refuse an integer that no Arrow integer type holds, on an integer column."""
    if isinstance(value, int) and not _ARROW_INTEGERS[0] <= value <= _ARROW_INTEGERS[1]:
        raise _unfit(column, op, value, kind, "beyond what any Arrow integer type holds, -2**63 to 2**64-1; to "
                     "compare it as a number, write it with a decimal point or an exponent, e.g. 1e30", written)


def _as_double(column: str, op: str, value: int | float, kind: pa.DataType, written: Any = None) -> float:
    """A number compared with a floating-point column, as a double (an integer too large for int64 fits one)."""
    try:
        return float(value)
    except OverflowError:
        raise _unfit(column, op, value, kind, "beyond the range of a double", written) from None


#: A condition on a column that is null in every row (of type null: no document gave it a value): it matches no
#: row whatever the value, as a null matches no condition (``{field: x, eq: 10**30}`` as ``eq: 5``, no overflow).
NO_ROW = pc.scalar(False)

_METHODS = {"eq": "__eq__", "ne": "__ne__", "gt": "__gt__", "gte": "__ge__", "lt": "__lt__", "lte": "__le__"}


def comparison(column: pc.Expression, op: str, value: Any, kind: pa.DataType, name: str) -> pc.Expression:
    """``column op value``: a number compares with a number column as a number (a double on a floating-point
    column, exactly on an integer one); any other value is cast to the column's type."""
    _check_kinds(name, op, value, kind)
    if pa.types.is_null(kind):
        return NO_ROW
    if _is_number(value) and pa.types.is_integer(kind):
        return _integer_comparison(column, op, value, kind, name)
    if _is_number(value) and pa.types.is_floating(kind):
        return getattr(_doubles(column), _METHODS[op])(pa.scalar(_as_double(name, op, value, kind), pa.float64()))
    return getattr(column, _METHODS[op])(literal(value, kind, name, op))


def _integer_comparison(column: pc.Expression, op: str, value: int | float, kind: pa.DataType,
                        name: str) -> pc.Expression:
    """``column op value`` on an integer column, exactly, in the column's own type: a fraction is rounded the way
    that keeps the comparison (gt 2019.5 is gt 2019, and no year equals it), and a value beyond the column type's
    range decides it alone (every int8 is below 300). Arrow's own cast to double fails on values above 2**53."""
    _held(name, op, value, kind)
    low, high = _integer_range(kind)
    never, always = pc.scalar(False), column.is_valid()
    if isinstance(value, float) and math.isnan(value):
        return always if op == "ne" else never
    if op in ("eq", "ne"):
        if (isinstance(value, int) or value.is_integer()) and low <= int(value) <= high:
            return getattr(column, _METHODS[op])(pa.scalar(int(value), kind))
        return never if op == "eq" else always
    if math.isinf(value):
        bound = high + 1 if value > 0 else low - 1
    else:
        bound = math.floor(value) if op in ("gt", "lte") else math.ceil(value)
    if bound < low:
        return always if op in ("gt", "gte") else never
    if bound > high:
        return always if op in ("lt", "lte") else never
    return getattr(column, _METHODS[op])(pa.scalar(bound, kind))


def _doubles(column: pc.Expression) -> pc.Expression:
    """A floating-point column as doubles, cast without Arrow's exactness check: a shard whose column is still
    integer (its type merged to double with a later shard's) otherwise fails on large values (Arrow checks its
    implicit cast: 2**30 beside the literal 1.5 fails), and its rows drop out of a pre-filter's matches."""
    return column.cast(pa.float64(), safe=False)


def membership(column: pc.Expression, op: str, values: list, kind: pa.DataType, name: str) -> pc.Expression:
    """``column in values`` (``not_in``: none of them, the column not null); numbers as in ``comparison``: on an
    integer column a fraction or a value beyond the column's type matches no row, so it leaves the set."""
    for value in values:
        _check_kinds(name, op, value, kind, values)
    if pa.types.is_null(kind):
        return NO_ROW
    if pa.types.is_integer(kind):
        low, high = _integer_range(kind)
        kept = []
        for value in values:
            if not _is_number(value):
                kept.append(literal(value, kind, name, op, values).as_py())
                continue
            _held(name, op, value, kind, values)
            if (isinstance(value, int) or value.is_integer()) and low <= int(value) <= high:
                kept.append(int(value))
        value_set = pa.array(kept, kind)
    elif pa.types.is_floating(kind):
        value_set = pa.array([_as_double(name, op, v, kind, values) if _is_number(v)
                              else literal(v, kind, name, op, values).as_py() for v in values], pa.float64())
    else:
        value_set = pa.array([literal(v, kind, name, op, values).as_py() for v in values], kind)
    found = (_doubles(column) if pa.types.is_floating(kind) else column).isin(value_set)
    return found if op == "in" else ~found & column.is_valid()


#: The Arrow function ``any_listed`` calls: Arrow has no "a list holds one of these" kernel an expression can call.
ANY_LISTED = "tessera_any_listed"


def _any_listed(_context, lists: pa.Array, wanted: pa.Scalar | pa.Array) -> pa.Array:
    """Per row of ``lists``, whether one of its items, lowercased, is in ``wanted`` (lowercase); null for a null
    list. Arrow's kernels on the flattened items, and each item's row by its parent index."""
    if isinstance(wanted, pa.Array):  # a literal may come broadcast to the batch
        wanted = wanted[0]
    hit = pc.is_in(pc.utf8_lower(pc.list_flatten(lists)), value_set=wanted.values).fill_null(False)
    found = np.zeros(len(lists), dtype=bool)
    found[pc.list_parent_indices(lists).to_numpy()[hit.to_numpy(zero_copy_only=False)]] = True
    return pa.array(found, mask=lists.is_null().to_numpy(zero_copy_only=False))


try:
    pc.register_scalar_function(
        _any_listed, ANY_LISTED, {"summary": "a list holds one of the values",
                                  "description": "Whether an item of each list, lowercased, is in the set."},
        {"lists": pa.list_(pa.string()), "wanted": pa.list_(pa.string())}, pa.bool_())
except pa.ArrowKeyError:  # registered already (this module imported again)
    pass


def holds_text_lists(kind: pa.DataType) -> bool:
    """Whether a column of ``kind`` holds lists of text (a list column ``any_listed`` reads)."""
    return (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and (
        _holds(kind.value_type) == "text" or pa.types.is_null(kind.value_type))


def any_listed(column: pc.Expression, values: list[str]) -> pc.Expression:
    """The list of text in ``column`` holds one of ``values`` (lowercase; its items compared lowercased); null
    where the list is null, false for an empty one."""
    return pc.Expression._call(ANY_LISTED, [column.cast(pa.list_(pa.string())),
                                            pa.scalar(values, pa.list_(pa.string()))])


def literal(value: Any, kind: pa.DataType, column: str, op: str, written: Any = None) -> pa.Scalar:
    """``value`` as a scalar of the column's type (ISO strings become dates for date columns)."""
    given = value
    try:
        if isinstance(value, str) and (pa.types.is_date(kind) or pa.types.is_timestamp(kind)):
            parsed = dt.datetime.fromisoformat(value)
            if pa.types.is_timestamp(kind) and kind.tz and parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.timezone.utc)
            value = parsed.date() if pa.types.is_date(kind) else parsed
        elif isinstance(value, dt.date) and pa.types.is_timestamp(kind) and not isinstance(value, dt.datetime):
            value = dt.datetime(value.year, value.month, value.day,
                                tzinfo=dt.timezone.utc if kind.tz else None)
        elif isinstance(value, dt.date) and (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            value = value.isoformat()
        return pa.scalar(value).cast(kind) if not pa.types.is_null(kind) else pa.scalar(value)
    except (ValueError, TypeError, OverflowError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        raise _unfit(column, op, given, kind, (str(err).strip().splitlines() or [type(err).__name__])[0],
                     written) from None


def null_comparison(data: dict) -> str | None:
    """Why a mapping whose only conditions are comparisons with null (``{field: lang, eq: null}``) is refused: a
    null compares with nothing, and the author meant ``missing`` (it was refused as a ``field`` with no condition)."""
    nulls = [name for name in ("eq", "ne", "gt", "gte", "lt", "lte", "in", "not_in") if name in data
             and data[name] is None]
    if not nulls or any(value is not None for name, value in data.items() if name not in ("field", *nulls)):
        return None
    column = data.get("field", "COLUMN")
    rows, missing = {"eq": ("has no value", "true"), "ne": ("has a value", "false")}.get(nulls[0], (None, "true"))
    hint = (f"for the rows where {column} {rows} write {{field: {column}, missing: {missing}}}" if rows else
            f"give it a value, or write {{field: {column}, missing: true}} for the rows without one")
    return f"'{nulls[0]}: null' is no condition (a null compares with nothing); {hint}"
