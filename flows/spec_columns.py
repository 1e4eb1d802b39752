"""Which columns can reach each step of a flow, and the steps refused for a required column none can bring.

``Flow.check_columns`` asks ``missing_columns`` once the flow input's columns are known (an executor, before the
first step; the service, before a task is queued). Which columns reach a step is known from the spec only in part:
each operator declares what it writes (``produces()``), and a row, query or corpus step passes its input's columns
on. Some steps bring columns nobody declared: a source brings its file's fields, a retriever its index's metadata
columns (known when the index is named and readable: its manifest lists them), and the flow input may be any table
holding ``qid`` and ``query``. Such a step is *open*; a missing column is refused only when no open step above can
bring it, so a valid flow is never refused for a column the data may hold.

The steps a step runs on rows it makes itself (``Operator.row_steps``: ``retrieve.multi_collection``'s
``postprocess``) are checked the same way, against what its searches (its other nested operators) write and their
indices hold: such a step's missing column failed mid-run, after the searches had run.
"""

from __future__ import annotations

from typing import Any, Collection, Iterable

from operators.errors import SpecError


def index_columns(op: Any) -> set[str] | None:
    """The document columns of the index a retriever names (from its manifest), or None if not known."""
    index = getattr(getattr(op, "params", None), "index", None)
    if not index or not isinstance(index, str) or not hasattr(op, "index_identity"):
        return None
    from operators.store import resolve_index
    from operators.store.layout import read_manifest

    try:
        manifest = read_manifest(resolve_index(index))
    except Exception:  # an index that cannot be read now fails later, at setup, with its own error
        return None
    if not manifest.shards:
        return None
    from operators.retrieve._index_retriever import PASSAGE_COLUMNS  # every hit's, filled where a shard lacks one

    return {column for shard in manifest.shards for column in shard.columns} | set(PASSAGE_COLUMNS)


def brought_columns(op: Any) -> set[str] | None:
    """Columns a step may write besides those it declares: None when unknown (the step is open)."""
    if op.scope == "source":
        return None
    if "docno" in op.produces() and op.category() in ("retrieve", "sources"):
        if nested := list(op.nested_operators().values()):  # retrieve.multi_collection: its searches' indices
            held = [brought_columns(inner) for inner in nested]
            return None if any(columns is None for columns in held) else set().union(*held)
        return index_columns(op)
    return set()


def missing_columns(order: list[str], inputs: dict[str, tuple[str, ...]], operators: dict[str, Any],
                    needed: Iterable[str], input_columns: Collection[str] | None) -> list[SpecError]:
    """The required columns (``required_columns()``) no step above can bring, one error per step (and per step it
    runs on its own rows), for the ``needed`` steps; ``input_columns`` None: the flow input may hold any column."""
    available: dict[str, tuple[set[str], bool]] = {}  # step -> (columns its output may hold, open)
    reaching: dict[str, tuple[set[str], bool]] = {}  # step -> (columns its input may hold, open)
    flow_input = (set(input_columns or ()), input_columns is None)
    for step in order:
        op = operators[step]
        parents = [available[p] for p in inputs[step]] or [flow_input]
        columns = set().union(*(cols for cols, _ in parents))
        is_open = any(flag for _, flag in parents)
        if op.scope == "source":
            columns, is_open = set(), True
        brought = None if is_open else brought_columns(op)  # open already: no need to read an index's manifest
        available[step] = (columns | set(op.produces()) | (brought or set()), is_open or brought is None)
        reaching[step] = (columns, is_open)
    errors = []
    for step in needed:
        op = operators[step]
        columns, is_open = reaching[step]
        if op.scope == "source" or is_open:
            continue
        missing = [c for c in op.required_columns() if c not in columns]
        if missing:
            field = param_naming(op, missing[0])
            errors.append(SpecError(
                f"needs input column(s) {', '.join(missing)}, which no step above it writes and its input cannot hold "
                f"(it may hold: {', '.join(sorted(columns))})", step=step, op=op.name,
                field=f"steps.{step}.{field}"))
        errors.extend(_missing_in_row_steps(step, op, columns))
    return errors


def _missing_in_row_steps(step: str, op: Any, columns: set[str]) -> list[SpecError]:
    """The steps ``op`` runs in order on its own rows (``row_steps()``) whose required columns neither ``op``'s
    searches (its other nested operators: what they write and their indices hold, with ``op``'s input's ``columns``
    passed on) nor ``op`` itself nor the row steps before them write; none while an index searched is unknown."""
    row_steps = op.row_steps()
    searches = [nested for field, nested in op.nested_operators().items() if field not in row_steps]
    brought = [brought_columns(nested) for nested in searches]
    if not row_steps or any(held is None for held in brought):
        return []
    rows = set(columns).union(*(nested.produces() for nested in searches), *brought, op.made_columns())
    lists = sorted({field.rsplit(".", 1)[0] for field in op.nested_operators() if field not in row_steps})
    errors = []
    for field, nested in row_steps.items():
        if missing := [c for c in nested.required_columns() if c not in rows]:
            errors.append(SpecError(
                f"needs input column(s) {', '.join(missing)}, which neither the steps before it in "
                f"{field.rsplit('.', 1)[0]} nor the searches of {', '.join(lists)} write, their indices do not hold "
                f"and step '{step}'s input cannot bring (its rows may hold: {', '.join(sorted(rows))})", step=step,
                op=nested.name, field=f"steps.{step}.{field}.{param_naming(nested, missing[0], 'op')}"))
        rows |= set(nested.produces())
    return errors


def param_naming(op: Any, column: str, otherwise: str = "inputs") -> str:
    """The param whose value is ``column`` (``params.text_column``) or names it (a filter's), else ``otherwise``."""
    for name, value in dict(op.params).items():
        if value == column or (isinstance(value, (list, tuple)) and column in value) or (
                callable(getattr(value, "columns", None)) and column in value.columns()):
            return f"params.{name}"
    return otherwise
