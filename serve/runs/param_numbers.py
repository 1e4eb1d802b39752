"""Which numbers a step's params from the network may hold: finite ones, and integers that JSON carries exactly.

Python's JSON reader takes what JSON does not (``NaN``, ``Infinity``) and integers of any size, and many params have
no upper bound (``preprocess.chunk``'s ``size``, ``rerank.tfidf``'s ``n``): ``2**70`` reached NumPy and C code as
an ``OverflowError`` (a 500), and a ``NaN`` cutoff silently dropped every hit. So a spec the service runs or saves
holds integers within I-JSON's exact range (RFC 7493: ±(2**53 - 1)) and finite floats only; each other number is a
422 naming its field. A filter's values are the exception for integers: a filter compares them with a column's
own type and says itself when one does not fit (``10**30`` against a float column is a double, against an int64
column a 422 naming the condition). Walked without recursion: the depth is checked apart
(``index_roots.check_depth``).
"""

from __future__ import annotations

import math
from typing import Any

from serve.http.errors import ApiError

#: The param whose values a filter checks against the columns' types itself (``operators.filter_values``).
FILTER_PARAM = "filter"
#: The largest integer a JSON number carries exactly between implementations (I-JSON, RFC 7493 section 2.2).
MAX_EXACT_INT = 2**53 - 1


def check_numbers(params: Any, field: str) -> None:
    """A 422 naming the first number in ``params`` (at ``field``: ``steps.c.params``) that is not finite or is an
    integer beyond ``MAX_EXACT_INT``."""
    stack = [(params, field, False)]
    while stack:
        value, where, in_filter = stack.pop()
        if isinstance(value, dict):
            stack.extend((item, f"{where}.{key}", in_filter or (where == field and key == FILTER_PARAM))
                         for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((item, f"{where}.{i}", in_filter) for i, item in enumerate(value))
        elif isinstance(value, bool):
            continue
        elif isinstance(value, int) and abs(value) > MAX_EXACT_INT and not in_filter:
            raise ApiError(422, f"{where}: {value} is out of range; an integer here is at most {MAX_EXACT_INT} "
                           "(2**53 - 1) either way", param=where, code="number_out_of_range")
        elif isinstance(value, float) and not math.isfinite(value):
            raise ApiError(422, f"{where}: {value} is not a number JSON has; give a finite number", param=where,
                           code="number_out_of_range")
