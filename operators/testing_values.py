"""Column values for the operator contract's checks (``operators.testing``): two columns compared as a cache would
see them, and a column with every value changed."""

from __future__ import annotations

import re
from typing import Any, Iterable

import numpy as np
import pyarrow as pa


def same_values(a: pa.ChunkedArray, b: pa.ChunkedArray) -> bool:
    """Equal columns; floats equal to within rounding (lingua's confidences, summed in parallel, differ in their
    last bit from run to run)."""
    if a.type == b.type and pa.types.is_floating(a.type) and a.null_count == b.null_count:
        x, y = a.to_numpy(zero_copy_only=False), b.to_numpy(zero_copy_only=False)
        return bool(np.allclose(x, y, rtol=1e-9, atol=0.0, equal_nan=True))
    return a.equals(b)


def altered(column: pa.ChunkedArray, texts: Iterable[str]) -> pa.ChunkedArray | None:
    """``column`` with every value replaced outright, deterministically: each distinct value by the next one met (a
    null by the first), or, for one value, by text sharing no word with it, a number one more or the other boolean.
    None where nothing can change it (a list column of one value, say)."""
    values = column.to_pylist()
    distinct = list({repr(v): v for v in values if v is not None}.values())
    if len(distinct) > 1:
        following = {repr(v): distinct[(i + 1) % len(distinct)] for i, v in enumerate(distinct)}
        new = [distinct[0] if v is None else following[repr(v)] for v in values]
    elif (other := _another(column.type, distinct[0] if distinct else None, texts)) is not None:
        new = [distinct[0] if v is None and distinct else other for v in values]
    else:
        return None
    try:  # None for a type Python values cannot be written back as (an extension type, say): left as it is
        return pa.chunked_array([pa.array(new, column.type)], column.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
        return None


def _another(kind: pa.DataType, value: Any, texts: Iterable[str]) -> Any:
    """A value of type ``kind`` other than ``value`` (None: the column is all null; text: one of ``texts`` sharing
    no word with it), or None where there is none."""
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        words = set(re.findall(r"\w+", (value or "").lower()))
        return next((t for t in texts if not words & set(t.split())), "z" * (len(value or "") + 1))
    if pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        return value is not True if pa.types.is_boolean(kind) else 1 if value is None else value + 1
    return None
