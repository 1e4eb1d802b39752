"""What every executor shares: inputs, per-step bookkeeping, progress and results."""

from __future__ import annotations

import time
from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flows.cache import StepCache
from flows.progress import CancelToken, ProgressCallback, ProgressEvent
from flows.queries import text_like
from flows.result import FlowResult, StepRecord
from flows.runner import BatchStats, caches, merge_metadata
from flows.spec import Flow, FlowSpec
from operators.errors import OperatorError, SpecError, short_repr
from operators.base import Operator
from operators.tables import concat, group_by_qid
from operators.unicode import blank, first_broken_text, unicode_problem


def as_flow(flow: Flow | FlowSpec | str) -> Flow:
    if isinstance(flow, Flow):
        return flow
    if isinstance(flow, FlowSpec):
        return flow.build()
    return FlowSpec.load(flow).build()


QUERIES_ACCEPTED = ("one text, a list of texts, a pyarrow Table or pandas DataFrame with columns qid and query, or "
                    "(to Flow.run) a dict {qid: text} or of columns qid and query, or a list of dicts with qid and "
                    "query")


def as_queries(queries: pa.Table | str | Iterable[str] | None, flow: Flow | None = None) -> pa.Table:
    """A queries table (``qid: string, query: string``) from a table, a DataFrame, one text, or a list of texts.

    Whole-number qids become text (``7`` -> ``"7"``): the data model's qids are strings, and a qrels file's are.
    ``None`` (no input, the executors' default) is an empty table; given the ``flow`` (``Flow.run`` gives it), a
    flow with a step that reads the queries refuses it, as a run that would silently give no rows, while one
    whose steps all start at a source takes it.
    """
    if queries is None:
        if flow is not None and (step := query_step(flow)) is not None:
            raise SpecError(f"queries is None, but step '{step}' ({flow.operators[step].name}) reads the queries: "
                            f"give {QUERIES_ACCEPTED}", field="queries", step=step)
        return pa.table({"qid": pa.array([], pa.string()), "query": pa.array([], pa.string())})
    if type(queries).__name__ == "DataFrame" and type(queries).__module__.startswith("pandas"):
        try:
            queries = pa.Table.from_pandas(queries, preserve_index=False)
        except UnicodeEncodeError:  # a lone surrogate, which Arrow's UTF-8 cannot hold: say where
            place, why = first_broken_text(queries.to_dict("list")) or ("text.0", "is not valid Unicode")
            column, _, row = place.rpartition(".")
            raise SpecError(f"the queries' {column} of row {int(row) + 1} {why}", field="queries") from None
        except (pa.ArrowInvalid, pa.ArrowTypeError) as err:  # a column of mixed types: say which, where
            raise mixed_column(queries.to_dict("list")) \
                or SpecError(f"the queries do not make a table: {err}", field="queries") from None
    if isinstance(queries, pa.Table):
        if "qid" not in queries.column_names or "query" not in queries.column_names:
            raise SpecError(_lacking_columns(queries.column_names), field="queries")
        return _checked_table(_text_column(_text_column(queries, "qid", numbers=True), "query", numbers=False))
    if isinstance(queries, str):
        queries = [queries]
    if isinstance(queries, (bytes, dict)) or not isinstance(queries, Iterable):
        raise SpecError(f"queries must be {QUERIES_ACCEPTED}; got {type(queries).__name__} {short_repr(queries)}",
                        field="queries")
    if isinstance(queries, (set, frozenset)):  # its order changes from run to run, and so would the qids
        raise SpecError(f"queries is a {type(queries).__name__}, whose order Python does not keep, so qids 1, 2, ... "
                        f"would name other queries in another run: pass a list (sorted(queries) for a fixed order) or "
                        f"a dict {{qid: text}}", field="queries")
    texts = list(queries)
    if wrong := [(i, q) for i, q in enumerate(texts, 1) if not isinstance(q, str)]:
        i, q = wrong[0]  # None, not Python's "NoneType None": the caller wrote None
        given = "None" if q is None else f"{short_repr(q)} ({type(q).__name__})"
        raise SpecError(f"query {i} of {len(texts)} is {given}, not text: each query is the text to search for (a "
                        f"str); queries must be {QUERIES_ACCEPTED}", field="queries")
    if broken := next(((i, why) for i, text in enumerate(texts, 1) if (why := unicode_problem(text))), None):
        raise SpecError(f"query {broken[0]} of {len(texts)} {broken[1]}", field="queries")
    if empty := [i for i, text in enumerate(texts, 1) if blank(text)]:
        raise SpecError(f"query {empty[0]} of {len(texts)} is empty: give the text to search for", field="queries")
    return pa.table({"qid": [str(i + 1) for i in range(len(texts))], "query": texts})


def _lacking_columns(names: list[str]) -> str:
    """Why a queries table is refused: the column it lacks, and the rename that gives it where it holds a query file's
    other names (``_id``, ``query_id``, ``id``; ``text``), or the list of texts where it has no qid at all."""
    from flows.queries import ID_FIELDS, TEXT_FIELDS

    lacks = [name for name in ("qid", "query") if name not in names]
    renames = {found: name for name, fields in (("qid", ID_FIELDS), ("query", TEXT_FIELDS)) if name in lacks
               for found in [next((f for f in fields if f in names), None)] if found is not None}
    said = f"a queries table needs columns qid and query; it lacks {' and '.join(lacks)} (columns: {', '.join(names)})"
    if renames:
        pairs = ", ".join(f"{old!r}: {new!r}" for old, new in renames.items())
        named = " and ".join(f"{old} to {new}" for old, new in renames.items())
        return f"{said}: rename {named} (df.rename(columns={{{pairs}}}), or a pyarrow Table's rename_columns)"
    if lacks == ["qid"]:
        return f"{said}: add one (a qid is text: '1', 'q7'), or pass the texts alone, numbered 1, 2, ...: a list"
    return said


def mixed_column(columns: dict[str, list]) -> SpecError | None:
    """The error of the first of ``columns`` that Arrow cannot hold as one type (a DataFrame's object column with
    text and a number, or a list), naming the column, the rows and their values, or None: pyarrow's own error
    (``Expected bytes, got a 'int' object``) names neither the row nor the value."""
    for name, values in columns.items():
        try:
            pa.array(values, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            present = [(row, value) for row, value in enumerate(values, 1) if value is not None and value == value]
            if not present:
                continue
            (first_row, first), (row, value) = present[0], next(
                ((r, v) for r, v in present if type(v) is not type(present[0][1])), present[-1])
            what = {"qid": "each qid is text (or every qid a whole number)",
                    "query": "each query is the text to search for (a str)"}.get(name, "a column holds one type")
            return SpecError(f"column {name} of the queries mixes types: row {first_row} of {len(values)} is "
                             f"{short_repr(first)} ({type(first).__name__}), row {row} is {short_repr(value)} "
                             f"({type(value).__name__}); {what}", field=f"queries.{name}")
    return None


def query_step(flow: Flow) -> str | None:
    """The first step (in run order) that reads the flow input (no parent and not a source), or None."""
    return next((s for s in flow.needed_steps() if not flow.inputs[s] and flow.operators[s].scope != "source"), None)


def _checked_table(table: pa.Table) -> pa.Table:
    """Refuse what the queries files refuse (``flows.queries``): a null or blank qid, a query with no text, which
    dense search answers with arbitrary documents, and, in a queries table (no ``docno``: a results table handed to
    a reranking flow has a row per document), a qid given twice, whose second query a step keyed by qid would
    silently drop; in a results table, a qid with two query texts, for the same reason."""
    import pyarrow.compute as pc

    qids = table.column("qid")
    no_id = pc.or_kleene(pc.is_null(qids), pc.equal(pc.utf8_trim_whitespace(qids), ""))
    if table.num_rows and pc.any(no_id).as_py():  # a null one failed as StopIteration; files refuse both
        row = pc.index(no_id, True).as_py()
        raise SpecError(f"qid of row {row + 1} of {table.num_rows} is empty: each query needs an id",
                        field="queries.qid")
    texts = table.column("query")
    empty = [text is None or blank(str(text)) for text in texts.to_pylist()]
    if any(empty):
        row = empty.index(True)
        raise SpecError(f"query of row {row + 1} of {table.num_rows} (qid '{table.column('qid')[row].as_py()}') is "
                        "empty: give the text to search for", field="queries.query")
    if "docno" not in table.column_names and pc.count_distinct(table.column("qid")).as_py() < table.num_rows:
        qids = table.column("qid").to_pylist()
        seen: set = set()
        twice = next(q for q in qids if q in seen or seen.add(q))
        raise SpecError(f"qid '{twice}' appears twice in the queries table: each query needs its own qid",
                        field="queries.qid")
    if "docno" in table.column_names and table.num_rows:  # a row per document: one query text per qid all the same
        texts_per_qid = table.group_by("qid").aggregate([("query", "count_distinct")])
        two = pc.greater(texts_per_qid.column("query_count_distinct"), 1)
        if pc.any(two).as_py():  # a step keyed by qid searched the first text alone, and the other went unsaid
            twice = texts_per_qid.column("qid")[pc.index(two, True).as_py()].as_py()
            raise SpecError(f"qid '{twice}' holds two different queries in the input table: each query needs its "
                            "own qid", field="queries.qid")
    return table


def _text_column(table: pa.Table, name: str, *, numbers: bool) -> pa.Table:
    """``table`` with column ``name`` as ``string``: other string types and nulls cast, whole numbers too when
    ``numbers``; anything else is a ``SpecError``."""
    kind = table.schema.field(name).type
    if kind == pa.string():
        return table
    castable = text_like(kind, numbers=numbers) \
        or table.num_rows == 0  # an empty DataFrame's columns are float64: no value to be of another type
    if not castable and numbers and pa.types.is_floating(kind) and table.column(name).null_count:
        # pandas holds whole numbers with a missing one (None, NaN) as floats: the missing one is the problem
        row = table.column(name).to_pylist().index(None)
        raise SpecError(f"{name} of row {row + 1} of {table.num_rows} is empty (null): each query needs an id",
                        field=f"queries.{name}")
    if not castable:
        allowed = "text or whole numbers" if numbers else "text"
        raise SpecError(f"column {name} of the queries table must be {allowed}, got {kind}", field=f"queries.{name}")
    return table.set_column(table.column_names.index(name), name, table.column(name).cast(pa.string()))


def fan_in(step: str, tables: list[pa.Table], parents: tuple[str, ...]) -> pa.Table:
    """Union of the parents' outputs, in ``inputs`` order; columns missing in one become null."""
    try:
        return concat(tables)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise OperatorError(f"cannot union the outputs of {', '.join(parents)}: {err}", step=step) from None


def step_output(step: str, op: str, parts: list[pa.Table]) -> pa.Table:
    """A step's batches' outputs as one table; outputs whose types differ per batch (a column of numbers in one and
    text in another) are an error naming the step, not pyarrow's internal one."""
    try:
        return concat(parts)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise unjoinable_outputs(step, op, str(err)) from None


def unjoinable_outputs(step: str, op: str | None, detail: str) -> OperatorError:
    """The error both executors raise for a step whose batches' outputs cannot be joined (``detail``: pyarrow's
    ``Unable to merge: Field x has incompatible types: int64 vs string``)."""
    return OperatorError(f"its outputs of different batches cannot be joined into one table ({detail.strip()}): "
                         f"transform must give every batch the same column types", step=step, op=op)


class RunState:
    """Bookkeeping of one run: progress events, step records, metadata, the result."""

    def __init__(self, flow: Flow, executor: str, *, cache: StepCache | None,
                 progress: ProgressCallback | None, cancel: CancelToken | None):
        self.flow = flow
        self.cache = cache
        self.progress = progress
        self.cancel = cancel or CancelToken()
        self.steps = flow.needed_steps()
        self.result = FlowResult(flow=flow.name, table=pa.table({}), roles=flow.roles(), executor=executor)
        self.started = time.perf_counter()
        self.rows_done = 0
        self.steps_done = 0
        self.input_rows: int | None = None  # the flow input's rows: the total of the steps that read it
        self.step_totals: dict[str, int | None] = {}
        self.reached: dict[str, set[str]] = {}  # the queries whose rows reached a step that tracks them (BatchStats)

    def step_cache(self, step: str) -> StepCache | None:
        return self.cache if self.flow.spec.steps[step].cache else None

    def start_step(self, step: str, rows_total: int | None = None) -> StepRecord:
        """The step's record; ``rows_total``, its input's rows where known (a step reading the flow input: its
        queries), lets progress say how far it is."""
        op = self.flow.operators[step]
        if rows_total is None and not self.flow.inputs[step] and op.scope != "source":
            rows_total = self.input_rows
        self.step_totals[step] = rows_total
        record = StepRecord(step=step, op=op.name, cached=self.step_cache(step) is not None and caches(op))
        self.result.steps[step] = record
        self.emit(step)
        return record

    def add_batch(self, step: str, stats: BatchStats) -> None:
        stats.add_counts_to(self.result.steps[step])
        merge_metadata(self.result.metadata, stats.metadata)
        self.reached.setdefault(step, set()).update(stats.qids)
        self.rows_done += stats.rows_out
        self.result.timings.add(f"step:{step}", stats.seconds)
        self.emit(step)

    def finish_step(self, step: str, output: pa.Table | None, keep_history: bool) -> None:
        self.steps_done += 1
        if output is not None and keep_history:
            self.result.history[step] = output
        record = self.result.steps[step]
        if self.cache is not None and record.cached:
            self.cache.record_step(self.flow.name, step, self.flow.operators[step],
                                   {"units": record.units, "hits": record.hits})
        self.emit(step)

    def emit(self, step: str | None, finished: bool = False) -> None:
        if self.progress is None:
            return
        record = self.result.steps.get(step) if step else None
        self.progress(ProgressEvent(
            flow=self.flow.name, step=step, op=record.op if record else None,
            steps_done=self.steps_done, steps_total=len(self.steps), rows_done=self.rows_done,
            step_rows_done=record.rows_out if record else 0, finished=finished,
            step_rows_in=record.rows_in if record else 0, step_rows_total=self.step_totals.get(step) if step else None,
        ))

    def finish(self, table: pa.Table, queries: pa.Table | None = None) -> FlowResult:
        """The result: the output step's ``table``, its queries in the order of the flow input ``queries``."""
        if queries is not None:
            self.add_no_rows_metadata(queries)
        self.result.table = in_query_order(table, queries) if queries is not None else table
        if self.result.table is not table:  # the output step's history is the result
            self.result.history.update({s: self.result.table for s, t in self.result.history.items() if t is table})
        present = set(table.column_names)  # a column the flow declares but a later step dropped has no role
        self.result.roles = {c: role for c, role in self.result.roles.items() if c in present}
        self.result.seconds = time.perf_counter() - self.started
        self.result.timings.add("flow", self.result.seconds)
        self.result.cache_read_only = self.cache.read_only() if self.cache is not None else None
        self.emit(None, finished=True)
        return self.result

    def add_no_rows_metadata(self, queries: pa.Table) -> None:
        """Each query of the flow input none of whose rows reached a step gets the metadata that step's operator
        declares for it (``Operator.no_rows_metadata``: ``generate.answer``'s decline), on the driver after the
        run, the same on every executor: the step never saw it, and the query had no answer record at all. A key
        the query holds already stays."""
        if "qid" not in queries.column_names:
            return
        qids = list(dict.fromkeys(str(q) for q in queries.column("qid").to_pylist() if q is not None))
        for step in self.steps:
            op = self.flow.operators[step]
            if op.scope == "source" or not op.no_rows_metadata():
                continue
            for qid in qids:
                if qid not in self.reached.get(step, ()):
                    held = self.result.metadata.setdefault(qid, {})
                    for key, value in op.no_rows_metadata().items():
                        held.setdefault(key, value)


def in_query_order(table: pa.Table, queries: pa.Table) -> pa.Table:
    """``table`` with its queries in the order ``queries`` gives them (stable: rows keep their order within a query).

    A fan-in lists a query after every query its first branch found (a BM25 that matched no word of the first
    query put that query's rows last). A qid the input does not hold (an expansion's ``q1#1``) stays after the
    row before it, so an expansion stays with its original.
    """
    if "qid" not in table.column_names or "qid" not in queries.column_names or table.num_rows < 2:
        return table
    try:
        given = queries.column("qid").cast(table.schema.field("qid").type)
        position = pc.index_in(table.column("qid"), value_set=given)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # qids of another kind than the input's: left as they are
        return table
    position = pc.fill_null(pc.fill_null_forward(position), -1).to_numpy(zero_copy_only=False)
    if bool((position[1:] >= position[:-1]).all()):
        return table  # already in order, the usual case: no copy of every row
    return table.take(np.argsort(position, kind="stable"))


def scope_batches(op: Operator, table: pa.Table, batch_size: int | None) -> Iterator[pa.Table]:
    """The batches an operator may see, by its scope (every executor cuts them this way)."""
    if op.scope == "corpus" or not batch_size or table.num_rows <= batch_size:
        if table.num_rows:
            yield table
    elif op.scope == "row":
        for start in range(0, table.num_rows, batch_size):
            yield table.slice(start, batch_size)
    else:  # query scope: runs of whole qid groups, about batch_size rows each, one zero-copy slice per batch
        grouped, _, bounds = group_by_qid(table)
        first = 0
        for end in query_batch_ends(np.diff(bounds).tolist(), batch_size):
            yield grouped.slice(bounds[first], bounds[end] - bounds[first])
            first = end


def query_batch_ends(group_rows: Sequence[int], batch_size: int | None) -> list[int]:
    """Where a query-scope input is cut: batch ``i`` holds groups ``ends[i - 1]:ends[i]``.

    Groups (queries, in order) stay whole and a batch closes once it holds ``batch_size``
    rows (one batch without a batch size). Both executors cut by this rule, the Ray one
    when it regroups, so a step sees the same batches wherever it runs.
    """
    ends, rows = [], 0
    for count, group in enumerate(group_rows, 1):
        rows += group
        if batch_size and rows >= batch_size and count < len(group_rows):
            ends.append(count)
            rows = 0
    return ends + [len(group_rows)] if len(group_rows) else ends
