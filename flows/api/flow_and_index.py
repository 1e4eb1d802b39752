"""The API's two objects: ``Index``, an index directory built by ingestion (what it holds, searching it), and
``Flow``, a validated flow loaded by name, file, text or dict and run over queries.

Why together: ``Index.search`` runs a built-in flow as a ``Flow``, and ``Flow.load`` takes an ``Index``; ``flows.api``
re-exports both as the API's front door.
"""

from __future__ import annotations

import numbers
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Iterable, Literal

import pyarrow as pa

from flows.api import index_changes
from flows.api.refusals import ALGEBRA, NoAlgebraError, no_attribute, no_flow_attribute, not_an_index, resume_said
from flows.api.step_caches import step_cache
from flows.keywords import checked_keywords
from flows.spec import FlowSpec, StepSpec, load_request
from flows.spec_checks import unused_index
from operators.errors import ParamsError, SpecError, short_repr

if TYPE_CHECKING:
    from flows.ingestion import IngestReport
    from flows.progress import CancelToken, ProgressCallback
    from flows.result import FlowResult
    from operators.filters import MetadataFilter
    from operators.store import Index as StoreIndex

Queries = str | Iterable[str] | pa.Table | dict
SearchMethod = Literal["bm25", "dense", "hybrid"]


class Index:
    """An index directory built by ingestion: what it holds, and searching it."""

    def __init__(self, store: "StoreIndex | str | os.PathLike", report: "IngestReport | None" = None):
        from operators.store import Index as StoreIndex

        if isinstance(store, Index):  # Index(Index.open(path)): the same index
            store, report = store.store, report or store.report
        elif isinstance(store, (str, os.PathLike)):  # Index(path), as a notebook writes it: Index.open(path)
            store = Index.open(store).store
        elif not isinstance(store, StoreIndex):  # None, a number: a bare AttributeError at the first search before
            raise not_an_index("Index", store)
        self.store = store          # operators.store.Index: shards, documents, add/update/delete
        self.report = report        # what the ingestion that returned this index did, if one did

    @classmethod
    def open(cls, path: "str | os.PathLike | Index") -> "Index":
        """An existing index: a folder, or a name under ``$TESSERA_HOME/indices``; an ``Index`` already open is the
        same one, as ``Index(index)`` is (a notebook's ``Index.open(index)`` was an IndexStoreError)."""
        from operators.store import Index as StoreIndex
        from operators.store import resolve_index

        if isinstance(path, Index):
            return cls(path)
        if not isinstance(path, (str, os.PathLike)):  # resolve_index's error named no argument
            raise not_an_index("Index.open", path)
        with resume_said():
            return cls(StoreIndex.open(resolve_index(path)))

    @property
    def path(self) -> Path:
        return Path(self.store.path)

    def __getattr__(self, name: str) -> Any:
        """A method of the store's (docs/indices.md: ``compact``, ``documents``, ``counts``, ...) asked of this
        ``Index`` says where it is, and another word for ``add``, ``update`` or ``delete`` (``upsert``) names it
        (``refusals.no_attribute``): a bare ``AttributeError`` sent the reader to the source."""
        if name.startswith("_") or "store" not in self.__dict__:  # (copy and pickle ask before __init__ ran)
            raise AttributeError(name)
        raise no_attribute(self, name)

    def __len__(self) -> int:
        """Live chunks (a document cut into passages counts once per passage)."""
        return len(self.store)

    def __repr__(self) -> str:
        counts, settings = self.store.counts(), self.store.settings
        kinds = " + ".join(k for k, on in (("bm25", settings.bm25), (f"dense {settings.encoder} "
                                                                   f"{settings.dense_type}", settings.dense)) if on)
        return (f"Index('{self.path}': {counts['live_chunks']:,} chunks in {counts['shards']} shard(s); "
                f"{kinds})")

    @checked_keywords
    def search(self, queries: Queries, k: int = 10, *, method: SearchMethod | None = None,
               filter: "dict | MetadataFilter | None" = None) -> pa.Table:
        """The top ``k`` chunks per query by the built-in ``bm25``, ``dense`` or ``hybrid`` flow (by default
        ``hybrid``, or the one the index holds when it has only BM25 or only vectors); ``filter``: a metadata
        filter, as a retrieval step's ``filter`` param (``{country: FR}``, ``{field: year, gte: 2010}``), searched
        as its pre-filter (k chunks even where matches are rare)."""
        from operators.retrieve._index_retriever import MAX_K

        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= k <= MAX_K:
            raise SpecError(f"k must be a whole number from 1 to {MAX_K:,} (the retrievers' most), got {k!r}",
                            field="k")
        k = int(k)  # numpy's integers too, as a notebook's arithmetic gives them
        method = self._method(method)
        spec = FlowSpec.load(method).with_index(str(self.path))
        if filter is not None:
            spec = spec.with_unset("filter", _checked_filter(filter, self.store))
        steps = {step_id: _at_least_k(step, k) for step_id, step in spec.steps.items()}
        steps["top"] = StepSpec(op="postprocess.reduce", params={"k": k}, inputs=[spec.build().output])
        flow = spec.model_copy(update={"name": f"search_{method}", "steps": steps, "output": "top"})
        return Flow(flow).run(queries, keep_history=False).table


    def add(self, documents: Any, **options: Any) -> "IngestReport":
        """Add ``documents`` (a list of dicts, a pandas DataFrame, a pyarrow Table, or a file, glob or folder) as
        ``ingest`` does, cut into passages as the index's documents were and embedded with its settings; what the run
        did. An id the index holds already is refused, naming it: ``update`` replaces such documents. ``options``:
        ``ingest``'s (``flows.api.index_changes``)."""
        return index_changes.add(self.store, documents, options)

    def update(self, documents: Any, **options: Any) -> "IngestReport":
        """Replace the documents with the ids of ``documents`` (their old passages go in the commit that adds the
        new ones), adding those the index lacks: ``add`` with ``replace=True``."""
        return index_changes.ingested(self.path, documents, "Index.update()", {**options, "replace": True})

    def delete(self, doc_ids: Iterable[str]) -> int:
        """Delete the documents ``doc_ids`` (every passage of each); how many passages went. An id the index does not
        hold (a typo among them) is refused, naming it, and nothing is deleted, as ``tessera index delete`` does."""
        return index_changes.delete(self.store, doc_ids)

    def _method(self, method: str | None) -> str:
        """``method``, checked against what the index holds; by default the richest one it can answer."""
        settings = self.store.settings
        held = {"bm25": settings.bm25, "dense": settings.dense, "hybrid": settings.bm25 and settings.dense}
        if method is None:
            return next((name for name in ("hybrid", "bm25", "dense") if held[name]), "hybrid")
        if not isinstance(method, str) or method not in held:
            raise SpecError(f"unknown method {method!r}; choose bm25, dense or hybrid", field="method")
        if not held[method]:
            can = [name for name in ("bm25", "dense") if held[name]]
            if not can:
                raise SpecError(f"{self.path.name} holds no search structure", field="method")
            missing, option, feature = ("BM25 term statistics", "--no-bm25", "bm25") \
                if method != "dense" and not settings.bm25 else ("dense vectors", "--no-dense", "dense")
            # not "was not ingested with": `tessera index add` makes such indices too
            raise SpecError(f"method '{method}' needs {missing}, which {self.path.name} was built without ({option} "
                            f"of tessera ingest or tessera index add; settings={{'{feature}': False}} in Python); "
                            f"use method={can[0]!r}", field="method")
        return method


def _checked_filter(given: "dict | MetadataFilter", store: "StoreIndex") -> dict:
    """``Index.search``'s ``filter`` as a retrieval step's ``filter`` param: checked by the same model, with the same
    messages, and against the index's columns (a column no document has, a value of another type), before anything
    is searched; errors name ``filter`` (``filter.country``), not the flow's steps."""
    from pydantic import ValidationError

    from operators.filters import FilterError, MetadataFilter

    try:
        flt = given if isinstance(given, MetadataFilter) else MetadataFilter.model_validate(given)
    except ValidationError as err:
        problem = ParamsError.from_validation(err, op=None, step=None)
        raise ParamsError(problem.message, field="filter" + problem.field.removeprefix("params")) from None
    schema = store.docs_schema()
    if schema is not None:  # no documents yet: a filter finds nothing, as the search does
        try:
            flt.to_expression(schema)
        except FilterError as err:
            raise FilterError(err.message, field=(err.field or "params.filter").replace("params.", "", 1)) from None
    return flt.model_dump(mode="json", by_alias=True, exclude_none=True)


def _at_least_k(step: Any, k: int) -> Any:
    """A retrieval step that fetches at least ``k`` candidates."""
    if "k" in step.params and "index" in step.params and step.params["k"] < k:
        return step.model_copy(update={"params": {**step.params, "k": k}})
    return step


class Flow:
    """A validated flow, ready to run over queries."""

    def __init__(self, spec: FlowSpec, *, unbound: FlowSpec | None = None):
        if not isinstance(spec, FlowSpec):
            raise SpecError(f"Flow(spec) takes a FlowSpec; got {type(spec).__name__} {short_repr(spec)}: "
                            f"Flow.load(NAME, index=...) loads a flow by name, file, text or dict", field="spec")
        self.spec = spec
        self.unbound = unbound if unbound is not None else spec  # before index= filled its unset ones: what save stores
        self.built = spec.build()  # operators and params checked here, before anything runs

    @classmethod
    @checked_keywords
    def load(cls, source: "str | os.PathLike | dict | FlowSpec | Flow", *,
             index: "Index | str | os.PathLike | None" = None, params: "dict[str, Any] | None" = None) -> "Flow":
        """A built-in or saved flow name, a spec file, YAML/JSON text, a dict, a ``FlowSpec`` or a ``Flow`` (its spec
        as it was loaded, before ``index``: the same flow over another index).

        ``index`` fills every retrieval step that leaves its ``index`` unset (the built-in flows do); one no step would
        search is refused, as ``--index`` is. ``params`` sets steps' params, named ``STEP.PARAM``: ``{"dense.k": 50,
        "answer.model": "gemma2"}`` (``tessera run --set``)."""
        if isinstance(source, FlowSpec):
            spec = source
        elif isinstance(source, Flow):  # another index for a flow loaded before
            spec = source.unbound
        elif isinstance(source, dict):  # a step's params.index may be a Path or an Index, as index= may (parse)
            spec = FlowSpec.parse(source)
        elif isinstance(source, (str, os.PathLike)):
            spec = load_request(os.fspath(source))[0]
        else:  # None or a number was looked up as a flow named 'None' or '3'
            raise SpecError(f"a flow is a flow name, a spec file, YAML or JSON text, a dict, a FlowSpec or a Flow; got "
                            f"{type(source).__name__} {short_repr(source)}", field="source")
        if index is not None and not isinstance(index, (str, os.PathLike)) and (
                isinstance(index, type) or not hasattr(index, "path")):  # Index, the class, has a path property
            raise SpecError(f"index must be an Index (Index.open(path)), an index name or a path; got "
                            f"{type(index).__name__} {short_repr(index)}", field="index")
        if params is not None:
            from flows.param_settings import with_settings

            if not isinstance(params, dict):
                raise SpecError(f"params is a dict {{'STEP.PARAM': value}}; got {type(params).__name__} "
                                f"{short_repr(params)}", field="params")
            spec = with_settings(spec, params)
        if index is not None and (no := unused_index(spec, f"index='{getattr(index, 'path', index)}'", "drop index=")):
            raise no  # before a missing index is said: "build one" would ask for an index the flow never reads
        if isinstance(index, (str, os.PathLike)):
            from operators.store.layout import check_index_exists

            with resume_said():
                check_index_exists(index)  # Index.open's error now, not the first search's
        return cls(spec.with_index(index), unbound=spec) if index is not None else cls(spec)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def steps(self) -> list[str]:
        """The steps the output depends on, in run order."""
        return self.built.needed_steps()

    @property
    def warnings(self) -> list[str]:
        """What building the flow warned about (an unfused fan-in of ranked inputs), as the log said it."""
        return self.built.warnings

    def check_columns(self, input_columns: Collection[str] | None) -> None:
        """Refuse, naming the step and param, a column that no step above it writes and ``input_columns`` lack."""
        self.built.check_columns(input_columns)

    def __getattr__(self, name: str) -> Any:
        """``flow.search(q)`` (PyTerrier's), ``flow.index`` or a misspelt name says what a flow does instead
        (``refusals.no_flow_attribute``), not a bare ``AttributeError``."""
        if name.startswith("_") or "spec" not in self.__dict__:  # (copy and pickle ask before __init__ ran)
            raise AttributeError(name)
        raise no_flow_attribute(self, name)

    def __rshift__(self, other: Any) -> Any:  # flow >> rerank, PyTerrier's; +, % likewise
        raise NoAlgebraError(ALGEBRA, field="flow")

    __rrshift__ = __add__ = __radd__ = __mod__ = __or__ = __and__ = __rshift__

    @staticmethod
    def class_keyword_elsewhere(name: str) -> str:
        """Where a keyword ``Flow.load`` does not take goes (``checked_keywords``): ``run``'s own to ``run``, any
        other as a step's param (``Flow.load("bm25", k=5)``) to ``params``, which names the step; a misspelt
        argument of its own (``indx``) is said to be one, and nothing more."""
        import inspect

        from operators.error_text import close_names

        if name in inspect.signature(Flow.run).parameters:
            return f"{name} is Flow.run's: Flow.load(...).run(queries, {name}=...)"
        if close_names(name, ["source", "index", "params"]):
            return ""
        return f"a step's param is set by params={{'STEP.{name}': ...}}, as tessera run --set STEP.{name}=... does"

    def keyword_elsewhere(self, name: str) -> str:
        """Where a keyword ``run`` does not take goes (``checked_keywords``): a param of the flow's steps
        (``run(q, k=5)``) is set by ``Flow.load``'s ``params``, and ``index`` is ``Flow.load``'s own."""
        if name == "index":
            return "the index is Flow.load's: Flow.load(flow, index=...) gives this flow another"
        steps = [step for step in self.steps if name in type(self.built.operators[step]).Params.model_fields]
        if not steps:
            return ""
        return (f"{name} is a param of step(s) {', '.join(steps)}: Flow.load(..., params={{'{steps[0]}.{name}': "
                f"...}}) sets a step's, as tessera run --set {steps[0]}.{name}=... does")

    def __repr__(self) -> str:
        """The steps in run order, ``->`` where a step reads the one before it, else what it reads: ``Flow('hybrid':
        bm25 (retrieve.bm25); dense (retrieve.dense <- queries); fused (fuse.rrf <- bm25 + dense))`` (``bm25 ->
        dense -> fused`` said that dense read bm25's rows)."""
        text, before = "", None
        for step in self.steps:
            inputs = list(self.built.inputs[step])
            chained = inputs == [before] if before is not None else not inputs
            reads = "" if chained else f" <- {' + '.join(inputs) or 'queries'}"
            shown = f"{step} ({self.spec.steps[step].op}{reads})"
            text += shown if before is None else f" -> {shown}" if chained else f"; {shown}"
            before = step
        return f"Flow({self.name!r}: {text})"

    @checked_keywords
    def run(self, queries: Queries | None = None, *, executor: Literal["local", "ray"] = "local",
            cache: bool | str | os.PathLike = False, keep_history: bool = True,
            progress: "ProgressCallback | None" = None, cancel: "CancelToken | None" = None) -> "FlowResult":
        """Run over one query, a list of queries, a dict ``{qid: text}`` (BEIR's loader's), or a ``qid, query`` table
        (a dict of those columns too; a pandas Series, by its index); returns the ``FlowResult``.

        ``executor="ray"`` runs the same flow as Ray Data stages. ``cache=True`` uses the
        step cache in ``$TESSERA_HOME/cache`` (a path: that folder). A model the flow needs that is
        not on this machine raises ``MissingModelsError`` (every one, with its step) before anything runs.
        """
        from flows.api_queries import dict_queries, record_queries, refuse_file, series_queries
        from flows.executors import make_executor
        from flows.executors.base import as_queries

        from flows.model_check import check_models
        from flows.progress import CancelToken
        from flows.query_limits import check_query_lengths
        from flows.train import train_command

        # checked before any step runs: a callback that is not one failed at the first batch, after model calls
        if progress is not None and not callable(progress):
            raise SpecError(f"progress is a function called with each ProgressEvent (flows.progress); got "
                            f"{type(progress).__name__} {short_repr(progress)}", field="progress")
        if not isinstance(keep_history, bool):  # "no" was kept as true
            raise SpecError(f"keep_history is True or False; got {type(keep_history).__name__} "
                            f"{short_repr(keep_history)}", field="keep_history")
        if cancel is not None and not isinstance(cancel, CancelToken):
            raise SpecError(f"cancel is a flows.progress.CancelToken; got {type(cancel).__name__} "
                            f"{short_repr(cancel)}", field="cancel")
        if type(queries).__name__ == "Series" and type(queries).__module__.startswith("pandas"):
            queries = series_queries(queries)  # df.set_index("_id")["text"] was numbered 1, 2, ..., its qids dropped
        if isinstance(queries, dict):
            queries = dict_queries(queries)
        queries = record_queries(queries)
        refuse_file(queries)
        unset = self.spec.unset_index_steps()
        if unset:
            step = next(iter(unset))
            raise SpecError("this step reads an index and none is set: Flow.load(..., index=...)",
                            step=step, field="params.index")
        check_models([self.built], how_to_make=train_command)  # every model, before any step runs
        table = as_queries(queries, self.built)
        check_query_lengths(table)  # the CLI's and the service's limit: before a 5 MB query is embedded
        runner = make_executor(executor, cache=step_cache(cache), keep_history=keep_history)
        return runner.run(self.built, table, progress=progress, cancel=cancel)

    def save(self, name: str, *, force: bool = False) -> Path:
        """Store this flow as a saved flow ``NAME`` (``$TESSERA_HOME/flows``), runnable by name everywhere; a saved
        flow of that name with another spec is replaced only with ``force`` (else a ``SpecError``).

        The index ``Flow.load(..., index=)`` gave it is not stored: the saved flow leaves those steps' ``index``
        unset, as it was, so ``tessera run NAME --index X`` and ``tessera bench --flow NAME`` fill in theirs."""
        from flows import store

        return store.save_kept(name, self.unbound, force=force)[0]
