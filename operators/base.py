"""The operator contract: what every Tessera step is.

An operator turns one Arrow table into another. The same instance runs in three
places (in-process, as a Ray Data ``map_batches`` callable class, behind a Serve
deployment), so the contract is small and has no Ray in it:

* ``name`` is the registry id, ``category.snake_name`` (``rerank.cross_encoder``).
  The class docstring's first line is the description shown by ``tessera ops``.
* The class name ends in the noun for what the step is in a flow: ``...Source`` for
  a step that reads its own rows, else the agent noun of what it does
  (``BM25Retriever``, ``CrossEncoderReranker``, ``ReciprocalRankFuser``,
  ``SentenceTransformerEmbedder``, ``Chunker``, ``ResultDeduplicator``,
  ``WordCounter``); a shared base is the bare noun (``Reranker``, ``Fuser``).
  Specs name operators by ``name`` or an alias, never by class.
* ``Params`` is a pydantic model: every field typed, defaulted and described with
  ``Field(description=...)``; unknown params are refused (``extra="forbid"``, or left
  unset). It is the only documentation of the parameters; ``tessera ops`` and
  ``/pipeline/info`` are generated from its JSON schema.
* ``scope`` says which rows a call may see:

  - ``row``: any batch of rows; output rows derive from input rows (one or more
    output rows per input row, extra input columns passed through),
  - ``query``: each call gets whole ``qid`` groups (rerankers, fusion, reduction),
  - ``corpus``: one call sees every row (fitting a model over a corpus),
  - ``source``: the operator reads its own rows (files, databases) and ignores its
    input; ``splits()`` and ``read(split)`` let executors read in parallel.

* Constructing an operator only validates params, so a whole flow spec can be
  checked without loading anything. Heavy state (models, indices) loads in
  ``setup()``, which must be idempotent; heavy imports live inside it. Executors
  call ``setup()`` once per instance (Ray: once per worker process that runs the step as
  tasks, or once per actor of a GPU or ``concurrency`` stage); ``__call__`` calls it too if
  nobody did.
* ``__call__`` checks the input columns (``requires()``) before ``transform`` and its output
  after (``check_output``): a pyarrow Table, every ``produces()`` column (on an empty table
  too; a source that read nothing may return a table without columns), no column twice, in row scope no
  fewer rows than came in, the ``qid`` column kept, the core columns it writes of the data model's
  types, and in query scope no rows for a qid it was not given (``operators.output_checks``). A
  breach is an ``OperatorError``.
* ``produces()`` declares the columns a step writes, with their roles (``rank``,
  ``text``, ``chip``, ``score``, ``data``), from the params alone, so a flow's columns
  are known before any data flows. ``reads()`` names the input columns the output
  depends on; it feeds the step cache key and the input check.
* ``required_models()`` names the models a step loads (an index's encoder: from its manifest),
  ``required_env()`` the environment variables it reads (params marked ``env_var()``: an API key),
  ``missing_files()`` the local files it reads that are not there: checked before any work starts.
* Resource hints (``num_gpus``, ``num_cpus``, ``batch_size``, ``concurrency``): class attributes a step may override.
* A step that ranks writes ``score``/``rank`` and keeps its own ``score_<step>``/
  ``rank_<step>`` copy (see ``operators.tables.set_ranking``).

Usage::

    op = WordCounter({"input_column": "text"}, step_id="wc")
    out = op(pa.table({"docno": ["d1"], "text": ["two words"]}))
"""

from __future__ import annotations

import inspect
import logging
import re
from typing import Any, ClassVar, Iterator, Literal, Mapping

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from operators import params as params_check
# Role and SHARED_METADATA re-exported: they were defined here before operators.declarations and operators.step_notes
from operators.declarations import Role, StepDeclarations  # noqa: F401
from operators.errors import FlowCancelled, OperatorError, ParamsError, SourceError, StepFailed, TesseraError
from operators.failed_batch import failed_batch
from operators.output_checks import output_breach, repeated_columns, returned_hint, table_hint, with_string_text
from operators.raised_at import raised_at
from operators.step_notes import SHARED_METADATA, StepNotes, StepRecording  # noqa: F401
from operators.tables import concat, require_columns, shown_columns

log = logging.getLogger(__name__)
#: Degraded queries of one call (a batch) logged as warnings; the rest at debug level, each in the result's metadata.
DEGRADED_WARNINGS = 5

Scope = Literal["row", "query", "corpus", "source"]


class NoParams(BaseModel):
    """Params of an operator that takes none."""

    model_config = ConfigDict(extra="forbid")


class Operator(StepDeclarations, StepRecording):
    """Base class of every Tessera operator (see the module docstring). What a step declares from its params
    (``produces``, ``reads``, ``required_models``, ...) is ``StepDeclarations``'; how it records per-query metadata
    and usage (``emit_metadata``, ``mark_degraded``, ``record_usage``, ...) is ``StepRecording``'."""

    name: ClassVar[str] = ""
    #: Other ids a spec may use for this operator (mosaicRAG step ids, old names).
    aliases: ClassVar[tuple[str, ...]] = ()
    version: ClassVar[str] = "1"
    scope: ClassVar[Scope] = "row"
    Params: ClassVar[type[BaseModel]] = NoParams

    # Resource hints; a flow step may override each one.
    num_gpus: ClassVar[float] = 0
    num_cpus: ClassVar[float] = 1
    batch_size: ClassVar[int | None] = 1024
    concurrency: ClassVar[int | None] = None
    # False for operators whose output must not be reused (randomness, live APIs).
    cacheable: ClassVar[bool] = True
    # When the params decide it (each instance sets ``cacheable``): the condition, for ``tessera ops``.
    cacheable_if: ClassVar[str | None] = None

    def __init__(self, params: BaseModel | Mapping[str, Any] | None = None, *, step_id: str | None = None,
                 input_steps: tuple[str, ...] = (), **keyword_params: Any) -> None:
        """``params`` as a dict or a ``Params``, or as keywords (``Op(k=5)`` is ``Op({"k": 5})``), not both."""
        self.step_id = step_id or self.default_step_id()
        self.input_steps = tuple(input_steps)
        params = params_check.with_keywords(params, keyword_params, op=self.name, step=self.step_id)
        self.params = self.validate_params(params, step_id=self.step_id)
        self._is_set_up = False
        self._own_notes = StepNotes()  # what calls outside ``recording`` record (an operator called directly)

    # -- construction -------------------------------------------------------

    @classmethod
    def default_step_id(cls) -> str:
        return cls.name.rsplit(".", 1)[-1] or cls.__name__

    @classmethod
    def validate_params(cls, params: BaseModel | Mapping[str, Any] | None, *, step_id: str | None = None) -> BaseModel:
        """Validate ``params`` into a ``Params`` instance; errors name the field (``operators.params``)."""
        return params_check.validate(cls.Params, params, op=cls.name, step=step_id)

    @classmethod
    def unknown_params(cls, params: Mapping[str, Any]) -> list[str]:
        """The keys of ``params`` that ``Params`` neither declares nor ignores on purpose (``operators.params``)."""
        return params_check.unknown_params(cls.Params, params)

    @classmethod
    def description(cls) -> str:
        """First paragraph of the class docstring, for ``tessera ops``, ``GET /flows`` and the web UI: its reST
        literals (double backticks) as Markdown's single ones. Its own docstring: an inherited one described it
        as its base (``Base of the rerankers``), and the contract test took that for a description."""
        doc = inspect.cleandoc(cls.__dict__.get("__doc__") or "")
        return re.sub(r"``([^`]+)``", r"`\1`", doc.split("\n\n", 1)[0].replace("\n", " ").strip())

    @classmethod
    def category(cls) -> str:
        return cls.name.split(".", 1)[0]

    # -- operators run inside this one --------------------------------------

    def nested_operators(self) -> dict[str, "Operator"]:
        """The operators this step runs inside itself, keyed by the params that configure each
        (``{"params.postprocess.0": <rerank.cross_encoder>}``), so what their params name is checked as theirs."""
        return {}

    def row_steps(self) -> dict[str, "Operator"]:
        """Of ``nested_operators()``, those run in order on the rows this step makes with the others (its searches):
        ``retrieve.multi_collection``'s ``postprocess``. Their required columns are checked before the flow runs, as
        a step's are (``flows.spec_columns``)."""
        return {}

    def made_columns(self) -> dict[str, str]:
        """The columns this step writes on its rows before its ``row_steps`` run on them: ``produces()`` less what
        only they write (which ``produces()`` names too, for the steps after this one)."""
        return self.produces()

    def walk(self, where: str = "") -> Iterator[tuple[str, "Operator"]]:
        """This step at ``where`` (``steps.m``), then every operator it runs inside itself, however deep, each with
        the field that configures it in full (``steps.m.params.postprocess.0``): what checks every operator of a
        step loops over. An empty ``where`` names this step's own fields from ``params``."""
        yield where, self
        for field, nested in self.nested_operators().items():
            yield from nested.walk(f"{where}.{field}" if where else field)

    # -- lifecycle ----------------------------------------------------------

    def setup(self) -> None:
        """Load heavy state. Idempotent: a second call does nothing."""

    def ensure_setup(self) -> None:
        if not self._is_set_up:
            try:
                self.setup()
            except TesseraError:  # Tessera's own (an index or a model not found) says what it is
                raise
            except Exception as err:  # a plugin's or a library's: name the step that could not set up
                raise OperatorError(f"its setup failed: {type(err).__name__}: {err}{raised_at(err, type(self))}",
                                    op=self.name, step=self.step_id) from err
            self._is_set_up = True

    def cache_identity(self) -> dict[str, Any]:
        """What, besides name and version, decides the output: the params (a model's operator adds its revision)."""
        return self.params.model_dump(mode="json")

    # -- the failure policy of one query ------------------------------------

    def degrade(self, qid: str, reason: str, *, keeps: str = "its input",
                error: type[OperatorError] = StepFailed, cause: BaseException | None = None) -> None:
        """The failure policy for one query, the same for every step that has ``on_error``: ``error`` fails the
        step (raising ``error`` from ``cause``, the failure met, so a caller can tell a refused URL from a model
        down); otherwise the query goes on, keeping ``keeps``, logged and marked degraded."""
        if getattr(self.params, "on_error", None) == "error":
            raise error(f"query '{qid}': {reason}", op=self.name, step=self.step_id) from cause
        notes = self.notes()
        notes.degraded_logged += 1
        if notes.degraded_logged <= DEGRADED_WARNINGS:
            log.warning("%s [%s]: query %s keeps %s: %s", self.name, self.step_id, qid, keeps, reason)
        else:  # a model server down for a whole batch: a line per query would bury the rest of the output
            if notes.degraded_logged == DEGRADED_WARNINGS + 1:
                log.warning("%s [%s]: more queries of this batch keep %s; each says why in the result's metadata "
                            "('degraded'); the rest are logged at debug level", self.name, self.step_id, keeps)
            log.debug("%s [%s]: query %s keeps %s: %s", self.name, self.step_id, qid, keeps, reason)
        self.mark_degraded(qid, reason)

    # -- running ------------------------------------------------------------

    def transform(self, table: pa.Table) -> pa.Table:
        raise NotImplementedError(f"{type(self).__name__} must implement transform()")

    def __call__(self, table: pa.Table) -> pa.Table:
        if not isinstance(table, pa.Table):  # a DataFrame, a dict, None: a bare AttributeError from inside before
            raise OperatorError(f"an operator is called on a pyarrow Table, not a {type(table).__name__}"
                                f"{table_hint(table)}", op=self.name, step=self.step_id)
        self.ensure_setup()
        if self.scope != "source":
            require_columns(table, self.requires(), op=self.name, step=self.step_id)
        try:
            out = self.transform(table)
        except OperatorError as err:  # the operator's own error: name its step when it did not
            err.step, err.op = err.step or self.step_id, err.op or self.name
            err.args = (str(err),)
            raise
        except FlowCancelled:
            raise
        except Exception as err:  # add the step, the line of the operator's code it came through and the rows
            raise OperatorError(f"{type(err).__name__}: {err}{raised_at(err, type(self))}{failed_batch(table)}",
                                op=self.name, step=self.step_id) from err
        if isinstance(out, pa.Table):
            out = with_string_text(table, out)  # a plugin's large_string text: the data model's, cached or not
        self.check_output(table, out)
        return out

    def check_output(self, table: pa.Table, out: Any) -> None:
        """What ``transform`` returned keeps the contract: a pyarrow Table holding every declared column and, for
        a row-scope step, at least as many rows as it was given, then ``output_checks.output_breach`` (qid kept,
        core column types, query scope's qids). Checked on each call (the schema, row counts, a query step's qids),
        so a broken operator fails here, naming its step, and not somewhere downstream."""
        writer = "read()" if self.scope == "source" else "transform"  # a source's batches: read_checked
        if not isinstance(out, pa.Table):
            raise OperatorError(f"{writer} {'yielded' if writer == 'read()' else 'returned'} {returned_hint(out)}",
                                op=self.name, step=self.step_id)
        if problem := repeated_columns(table, out):
            raise OperatorError(problem, op=self.name, step=self.step_id)
        present = set(out.column_names)
        nothing_read = self.scope == "source" and out.num_rows == 0  # an empty file: no rows, and no schema either
        if not nothing_read and (missing := [c for c in self.produces() if c not in present]):
            raise OperatorError(f"{writer} did not write declared column(s) {', '.join(missing)} (produces() declares "
                                f"them; output has {shown_columns(out)})", op=self.name, step=self.step_id)
        if self.scope == "row" and out.num_rows < table.num_rows:
            raise OperatorError(f"a row-scope step gives one or more output rows per input row; transform returned "
                                f"{out.num_rows} row(s) for {table.num_rows} (a step that drops rows needs scope "
                                f"'query' or 'corpus')", op=self.name, step=self.step_id)
        if problem := output_breach(self.scope, self.produces(), table, out):
            raise OperatorError(problem, op=self.name, step=self.step_id)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.model_dump().items())
        return f"{type(self).__name__}[{self.step_id}]({args})"

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and other.params == self.params  # type: ignore[attr-defined]
            and other.step_id == self.step_id  # type: ignore[attr-defined]
        )

    def __hash__(self) -> int:
        return hash((self.name, self.step_id, self.params.model_dump_json()))


class Source(Operator):
    """An operator that reads its own rows; executors may read its splits in parallel."""

    scope: ClassVar[Scope] = "source"
    batch_size: ClassVar[int | None] = None
    #: Whether the source decodes its text files a line at a time (JSONL, CSV): an ``encoding`` param (or
    #: ``tessera ingest --encoding``) must then write newlines, quotes and separators as ASCII does, so UTF-16 is
    #: refused. A source that decodes each file whole (``sources.files``) sets it False.
    reads_lines: ClassVar[bool] = True
    #: A reader's own place for the warnings of a file's documents, {their path: messages}, to log only those it
    #: takes (staging: not a finished shard's, read again only to compare); None: the source logs them as it reads.
    held_notes: dict[str, list[str]] | None = None

    @classmethod
    def validate_params(cls, params: BaseModel | Mapping[str, Any] | None, *, step_id: str | None = None) -> BaseModel:
        """``Operator.validate_params``, and an ``encoding`` param that this source can read with
        (``reads_lines``); else a ``ParamsError`` naming ``params.encoding``."""
        from operators.sources.encoding import check_encoding

        checked = super().validate_params(params, step_id=step_id)
        try:
            check_encoding(getattr(checked, "encoding", None), lines=cls.reads_lines)
        except SourceError as err:
            raise ParamsError(err.message, op=cls.name, step=step_id, field="params.encoding") from None
        return checked

    def splits(self) -> list[Any]:
        """Independent pieces of the input (files, row ranges). One by default."""
        return [None]

    def read(self, split: Any) -> Iterator[pa.Table]:
        raise NotImplementedError(f"{type(self).__name__} must implement read()")

    def read_checked(self, split: Any) -> Iterator[pa.Table]:
        """``read(split)``, each batch checked as ``check_output`` checks a step's output (a pyarrow Table, the declared
        columns, the core columns' types): the executors and ``tessera ingest`` read a source so, and a plugin's
        ``docno`` of ints fails here, naming its step and column, not as an internal error of the index's writer."""
        empty = pa.table({})
        for batch in self.read(split):
            if isinstance(batch, pa.Table):
                batch = with_string_text(empty, batch)
            self.check_output(empty, batch)
            yield batch

    def transform(self, table: pa.Table) -> pa.Table:
        return concat([batch for split in self.splits() for batch in self.read_checked(split)])

