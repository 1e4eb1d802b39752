"""What a flow run returns: the final table and everything needed to explain it."""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import pyarrow as pa

from operators.errors import MissingAttributeError, TesseraError, close_names, did_you_mean, unknown_name_hint


class Timings:
    """Named timers (the seeds' Observer/Event): ``with timings.timer("step:bm25"):``."""

    def __init__(self) -> None:
        self._totals: dict[str, float] = {}
        self._counts: dict[str, int] = {}

    @contextmanager
    def timer(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float, count: int = 1) -> None:
        self._totals[name] = self._totals.get(name, 0.0) + seconds
        self._counts[name] = self._counts.get(name, 0) + count

    def total(self, name: str) -> float:
        return self._totals.get(name, 0.0)

    def summary(self) -> dict[str, dict[str, float]]:
        """``{timer: {"seconds": total, "count": n, "mean": total / n}}``, in the order the timers started."""
        return {
            name: {"seconds": round(total, 6), "count": self._counts[name],
                   "mean": round(total / max(self._counts[name], 1), 6)}
            for name, total in self._totals.items()
        }

    def __repr__(self) -> str:
        """The summary, one timer a part: ``Timings(step:bm25 0.012 s, step:embed 1.5 s in 3 (0.5 s each), ...)``."""
        parts = [f"{name} {t['seconds']:.3g} s" + (f" in {t['count']} ({t['mean']:.3g} s each)" if t["count"] > 1
                                                    else "") for name, t in self.summary().items()]
        return f"Timings({', '.join(parts)})"


@dataclass
class StepRecord:
    """One step's run: operator, rows, cache units and hits, seconds, and what it spent (``usage``: LLM calls,
    prompt/completion tokens and model seconds of the calls this run made; cache hits spend nothing)."""

    step: str
    op: str
    rows_in: int = 0
    rows_out: int = 0
    units: int = 0
    hits: int = 0
    seconds: float = 0.0
    cached: bool = False
    usage: dict[str, float] = field(default_factory=dict)

    @property
    def hit_ratio(self) -> float | None:
        return self.hits / self.units if self.cached and self.units else None

    def __repr__(self) -> str:
        """The dataclass's fields, with ``seconds`` to 3 significant digits (``0.000729``, not ``0.0007292980008``)
        and ``usage`` only where the step spent any: a result's ``steps`` printed as a screenful of digits."""
        fields = {**vars(self), "seconds": float(f"{self.seconds:.3g}")}
        if not self.usage:
            del fields["usage"]
        return f"StepRecord({', '.join(f'{name}={value!r}' for name, value in fields.items())})"


class UnknownStepError(TesseraError, KeyError):
    """A ``FlowResult``'s ``history`` or ``steps`` has no such step: still the ``KeyError`` a dict raises, saying
    the close step ids and those it has (a bare ``KeyError: 'bm26'`` left the reader to list them)."""


class StepRecords(dict):
    """``FlowResult.steps``: a dict by step id whose missing key is an ``UnknownStepError``."""

    what = "steps"

    def __missing__(self, key: Any) -> Any:
        raise UnknownStepError(self.unknown(key, list(self)))

    def unknown(self, key: Any, known: list[str]) -> str:
        """``no step 'bm26' in this result's history; did you mean 'bm25'? (steps: bm25, dense, fused)``."""
        hint = did_you_mean(close_names(key, known)) if isinstance(key, str) else ""
        return (f"no step {key!r} in this result's {self.what}{hint and '; ' + hint} "
                f"(steps: {', '.join(known) or 'none'})")


class StepTables(StepRecords):
    """``FlowResult.history``, whose missing step says so, and where the run kept no history
    (``keep_history=False``: every step ran, none is here), that it was not kept."""

    what = "history"

    def __init__(self, tables: Any = (), result: "FlowResult | None" = None) -> None:
        super().__init__(tables)
        self.result = result

    def __missing__(self, key: Any) -> Any:
        ran = list(self.result.steps) if self.result is not None else []
        if not ran or any(step in self for step in ran):
            return super().__missing__(key)
        if key in ran:
            raise UnknownStepError(f"step {key!r} ran, but the run kept no history (keep_history=False): run with "
                                   "keep_history=True for each step's output (the result's table is the flow's)")
        raise UnknownStepError(self.unknown(key, ran) + "; the run kept no history (keep_history=False)")


class UnknownQueryError(TesseraError, KeyError):
    """A ``FlowResult``'s ``metadata`` has no such query: still the ``KeyError`` a dict raises, saying why (a qid
    given as a number, a query no step wrote metadata for, a misspelt qid) and the qids it has."""


class QueryMetadata(dict):
    """``FlowResult.metadata``: ``{qid: {key: value}}`` whose missing qid is an ``UnknownQueryError``; a bare
    ``KeyError: 1`` did not say that qids are text, nor that a flow with no answer step writes no metadata."""

    def __init__(self, values: Any = (), result: "FlowResult | None" = None) -> None:
        super().__init__(values)
        self.result = result

    def __missing__(self, key: Any) -> Any:
        table = self.result.table if self.result is not None else None
        ran = list(dict.fromkeys(table.column("qid").to_pylist())) if table is not None and \
            "qid" in table.column_names else []
        held = list(self)
        flow = f"flow {self.result.flow!r}" if self.result is not None else "the flow"
        if not held:
            raise UnknownQueryError(f"no metadata for query {key!r}: no step of {flow} wrote any (metadata is what "
                                    "generate.answer, generate.references, query.contextualize and summarize.results "
                                    "write per query: the answer, its sources, ...); the rows are in result.table")
        if not isinstance(key, str) and str(key) in {*held, *map(str, ran)}:
            raise UnknownQueryError(f"no query {key!r} in this result's metadata: qids are text, as in every "
                                    f"Tessera table: metadata[{str(key)!r}]")
        if key in ran:
            raise UnknownQueryError(f"no metadata for query {key!r}: no step of {flow} wrote any for it (queries "
                                    f"with metadata: {', '.join(held[:10])}{' ...' if len(held) > 10 else ''})")
        hint = did_you_mean(close_names(key, held)) if isinstance(key, str) else ""
        raise UnknownQueryError(f"no query {key!r} in this result's metadata{hint and '; ' + hint} (queries: "
                                f"{', '.join(held[:10])}{' ...' if len(held) > 10 else ''})")


class UnknownResultAttributeError(MissingAttributeError):
    """An attribute ``FlowResult`` lacks, saying where it is."""


@dataclass(repr=False)
class FlowResult:
    """Final table, per-step history (shared Arrow buffers, not copies), roles, timings, metadata."""

    flow: str
    table: pa.Table
    history: dict[str, pa.Table] = field(default_factory=dict)
    roles: dict[str, str] = field(default_factory=dict)
    steps: dict[str, StepRecord] = field(default_factory=dict)
    timings: Timings = field(default_factory=Timings)
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    executor: str = "local"
    seconds: float = 0.0
    #: Why the run stored nothing in the step cache it read (``StepCache.read_only()``: a read-only file system, a
    #: full disk), or None: the summary's hit ratio alone read as a cache that also stored this run's misses.
    cache_read_only: str | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        """``history``, ``steps`` and ``metadata`` as ``StepTables``, ``StepRecords`` and ``QueryMetadata`` whatever
        dict is set (an executor sets a plain one), so a misspelt step id or qid says which was meant."""
        if name == "history":
            value = StepTables(value, self)
        elif name == "metadata":
            value = QueryMetadata(value, self)
        elif name == "steps" and not isinstance(value, StepRecords):
            value = StepRecords(value)
        super().__setattr__(name, value)

    def __getattr__(self, name: str) -> Any:
        """An attribute the result lacks says where it is: a table's (``result.to_pandas()``: ``result.table``'s), a
        query's metadata (``rag.answer``: ``result.metadata['1']['answer']``), or the close names; a bare
        ``AttributeError`` sent the reader to the dataclass."""
        held = self.__dict__
        if name.startswith("_") or "table" not in held:  # (copy and pickle ask before the fields are set)
            raise AttributeError(name)
        metadata = held.get("metadata") or {}
        qid = next((q for q, values in metadata.items() if isinstance(values, dict) and name in values), None)
        if qid is not None:
            said = f"; {name} is per-query metadata: result.metadata[{qid!r}][{name!r}]"
        elif hasattr(pa.Table, name):
            said = f"; the rows are a pyarrow Table: result.table.{name}"
        else:
            said = unknown_name_hint(name, {*type(self).__dataclass_fields__,
                                            *(a for a in dir(type(self)) if not a.startswith("_"))}, "it has")
        raise UnknownResultAttributeError(f"a FlowResult has no {name!r}{said}", name=name, obj=self)

    @property
    def order(self) -> list[str]:
        """Steps in the order they ran."""
        return list(self.steps)

    @property
    def cache_hit_ratio(self) -> float | None:
        units = sum(s.units for s in self.steps.values() if s.cached)
        hits = sum(s.hits for s in self.steps.values() if s.cached)
        return hits / units if units else None

    @property
    def uncached_steps(self) -> str:
        """`` (answer, summary not cached)``: the steps that ran without the step cache (never cached, or a setting
        turned it off), beside a hit ratio that counts only the cached ones; "" when there are none."""
        uncached = [name for name, step in self.steps.items() if not step.cached]
        return f" ({', '.join(uncached[:3])}{' ...' if len(uncached) > 3 else ''} not cached)" if uncached else ""

    @property
    def nothing_stored(self) -> str:
        """Why the run stored nothing in the step cache, in a few words for a summary (``cache_read_only`` in full):
        ``read-only`` or ``the disk refused a write``; "" where it could store."""
        if not self.cache_read_only:
            return ""
        # the folder's two reasons (``flows.cache_database.unwritable``); any other is the disk's refusal
        here = self.cache_read_only in ("a read-only file system", "this user may not write there")
        return "read-only" if here else "the disk refused a write"

    def description(self, queries: int | None = None) -> str:
        """One line for people: documents, queries, time, cache hit ratio. ``queries``: how many were asked, where
        the caller knows (the table has rows only for those with results)."""
        t = self.table
        answered = len(set(t.column("qid").to_pylist())) if "qid" in t.column_names else 0
        asked = max(queries or 0, answered)
        without = f" ({asked - answered} with no results)" if queries is not None and asked > answered else ""
        ratio, unstored = self.cache_hit_ratio, self.nothing_stored and f", nothing stored ({self.nothing_stored})"
        parts = [counted(t.num_rows, "row"), f"{counted(asked, 'query', 'queries')}{without}" if asked else None,
                 f"{counted(len(self.steps), 'step')} in {self.seconds:.2f} s ({self.executor} executor)",
                 f"cache hit ratio {ratio:.0%}{self.uncached_steps}{unstored}" if ratio is not None
                 else "cache off"]
        return ", ".join(p for p in parts if p)

    def __repr__(self) -> str:
        """One line a notebook can show: the description, the columns, the steps and the queries with metadata;
        the dataclass's own repr printed every step's table in full (kilobytes for a two-query run)."""
        columns = ", ".join(self.table.column_names)
        parts = [self.description(), f"columns: {columns}" if columns else "no columns",
                 f"steps: {', '.join(self.steps)}" if self.steps else None,
                 f"metadata for {counted(len(self.metadata), 'query', 'queries')}"
                 if self.metadata else None]
        return f"FlowResult({self.flow!r}: {'; '.join(p for p in parts if p)})"

    def _repr_html_(self) -> str:
        """A notebook's view: the description, answers and the first rows as a table (``flows.result_html``)."""
        from flows.result_html import result_html

        return result_html(self)

    def to_dict(self, *, rows: bool = True) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "executor": self.executor,
            "description": self.description(),
            "roles": self.roles,
            "metadata": self.metadata,
            "steps": {k: _step_dict(v) for k, v in self.steps.items()},
            "timings": self.timings.summary(),
            "seconds": self.seconds,
            "cache_hit_ratio": self.cache_hit_ratio,
            "cache_read_only": self.cache_read_only,
            **({"rows": self.table.to_pylist()} if rows else {}),
        }


def _step_dict(record: StepRecord) -> dict[str, Any]:
    """A step for ``--json``: ``cacheable`` (whether it reads and writes the step cache) where the record says
    ``cached``, which beside ``hits: 0`` read as "served from the cache"; ``hits`` of ``units`` say what was."""
    fields = vars(record).copy()
    cacheable = fields.pop("cached")
    return {**fields, "cacheable": cacheable, "hit_ratio": record.hit_ratio}


def counted(n: int, one: str, many: str | None = None) -> str:
    """``"1 step"``, ``"3 steps"``, ``"1 query"``, ``"2 queries"``: a count with its noun (``many``: an irregular
    plural)."""
    return f"{n} {one if n == 1 else many or one + 's'}"
