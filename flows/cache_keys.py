"""Step-cache keys: which stored output a step may reuse, decided from its identity and its input alone.

A step's key is the operator id + version + ``cache_identity()`` (its params, plus
model name and revision where an operator loads one) + the code that computes it (the Tessera
version and a digest of its classes' source files: ``flows.cache_code``). Output is cached per *unit*
so that the hit ratio does not depend on how rows were batched across workers:

* ``row`` scope: one unit per input row, hashed over the columns the operator
  ``reads()``. Only the columns the operator writes are stored; the row's other
  columns (its id among them) come from the live input, so two documents with
  the same text share the computed value but keep their own ids.
* ``query`` scope: one unit per ``qid`` group, hashed over all its columns.
* ``corpus`` scope: the whole input is one unit.

Values are length-prefixed and type-tagged before hashing, so ``["ab", "c"]`` and
``["a", "bc"]`` can never share a key; table and schema metadata (timestamps and
the like) are not part of it. Why apart from ``flows.cache``: a key is pure (no files,
no database), and the runner, ``tessera cache explain`` and tests compute keys without a cache.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from typing import Any, Sequence

import pyarrow as pa

from flows.cache_code import code_identity
from operators.base import Operator
from operators.errors import OperatorError


def _encode(value: Any) -> bytes:
    """Type-tagged, length-prefixed bytes of one value: no two values share an encoding."""
    if value is None:
        return b"N"
    if isinstance(value, bool):
        return b"T" if value else b"F"
    if isinstance(value, str):
        data = value.encode("utf-8")
        return b"S" + struct.pack("<Q", len(data)) + data
    if isinstance(value, bytes):
        return b"B" + struct.pack("<Q", len(value)) + value
    if isinstance(value, int):
        data = str(value).encode()
        return b"I" + struct.pack("<Q", len(data)) + data
    if isinstance(value, float):
        return b"D" + struct.pack("<d", value)
    data = json.dumps(value, sort_keys=True, default=_stable_text).encode("utf-8")
    return b"J" + struct.pack("<Q", len(data)) + data


#: The text Python gives an object without a text of its own (``<function <lambda> at 0x7f...>``, a loaded model's
#: ``<mylab.Model object at 0x...>``): its address, another in each process.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


class _UnstableValue(TypeError):
    """A value whose text is another in each process, which no key may hold."""


def _stable_text(value: Any) -> Any:
    """What JSON writes for a value it has no form for: a set in sorted order (its own order is another in each
    process for text, as Python salts string hashes), else its text, which must not be an object's address."""
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=lambda item: json.dumps(item, sort_keys=True, default=_stable_text))
    text = str(value)
    if _ADDRESS.search(text):
        raise _UnstableValue(f"{type(value).__name__} {_ADDRESS.sub(' at 0x...', text)}")
    return text


def _key_bytes(op: Operator, explain: dict[str, Any]) -> bytes:
    """The bytes a step's key hashes, its ``cache_identity()`` serialized once among them; refused where a value in
    it reads another in each process (a function, a loaded model, an object without a text of its own): the step's
    key would change in every run and it would never be found in the cache, silently."""
    try:
        return _encode(explain)
    except _UnstableValue as err:
        raise OperatorError(f"its cache_identity() holds a {err}, whose text is another in each process, so the step "
                            "would never be found in the step cache: return what decides the output as text, numbers, "
                            "lists and dicts (a model's name and revision, not the model)", step=op.step_id,
                            op=op.name) from None


#: Bytes that open a step key: a digest of its operator's name. Every unit key of a step starts with the step key,
#: so one operator's stored outputs, whatever their params or version, are one range of the units' primary key
#: (``StepCache.clear(operator=...)``).
OPERATOR_TAG_BYTES = 4


def operator_tag(name: str) -> bytes:
    """The first bytes of every step key, and so of every unit key, of the operator ``name``."""
    return hashlib.blake2b(name.encode("utf-8"), digest_size=OPERATOR_TAG_BYTES).digest()


def step_key(op: Operator, explain: dict[str, Any] | None = None) -> str:
    """Hex key of an operator's identity: its name's tag, then a digest of its version and what decides its
    output (16 bytes in all). ``explain``: its ``step_explain(op)``, where the caller has it already."""
    data = _key_bytes(op, step_explain(op) if explain is None else explain)
    digest = hashlib.blake2b(data, digest_size=16 - OPERATOR_TAG_BYTES).digest()
    return (operator_tag(op.name) + digest).hex()


def step_explain(op: Operator) -> dict[str, Any]:
    """Everything that goes into a step's key, readable (``tessera cache explain``); its identity is checked where
    it is keyed (``step_key``)."""
    return {
        "op": op.name,
        "version": op.version,
        "identity": op.cache_identity(),
        "scope": op.scope,
        "reads": op.reads() if op.scope == "row" else None,
        # what the step declares it writes: a row-scope unit stores only those columns, and a retriever names two
        # of its columns after its step (score_<step>, rank_<step>), so a step renamed is another output
        "writes": sorted(op.produces()),
        # the code that computes it: an upgrade, or an edit of its class's file, is another output
        "code": code_identity(op),
    }


def _column_header(table: pa.Table, columns: Sequence[str]) -> bytes:
    return b"".join(_encode(c) + _encode(str(table.schema.field(c).type)) for c in columns)


def row_unit_keys(table: pa.Table, columns: Sequence[str], key: str) -> list[bytes]:
    """One key per row over ``columns`` (sorted): the step key, then a digest seeded with it."""
    columns = sorted(columns)
    step = bytes.fromhex(key)
    seed = step + _column_header(table, columns)
    values = [table.column(c).to_pylist() for c in columns]
    keys = []
    for row in zip(*values) if values else ([] for _ in range(table.num_rows)):
        h = hashlib.blake2b(seed, digest_size=16)
        for v in row:
            h.update(_encode(v))
        keys.append(step + h.digest())
    return keys


def table_unit_key(table: pa.Table, key: str) -> bytes:
    """One key over every column and row of ``table`` (a qid group or a whole corpus), after the step key."""
    columns = sorted(table.column_names)
    h = hashlib.blake2b(bytes.fromhex(key) + _column_header(table, columns), digest_size=16)
    h.update(struct.pack("<Q", table.num_rows))
    for c in columns:
        for v in table.column(c).to_pylist():
            h.update(_encode(v))
    return bytes.fromhex(key) + h.digest()
