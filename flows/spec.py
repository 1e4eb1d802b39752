"""Flow specs: a DAG of named steps, written in YAML or JSON.

::

    name: hybrid
    steps:
      bm25:  {op: retrieve.bm25, params: {k: 100}}
      dense: {op: retrieve.dense, params: {k: 100}, inputs: []}
      fused: {op: fuse.rrf, inputs: [bm25, dense]}

A step without ``inputs`` takes the previous step's output (the first step takes
the flow input); ``inputs: []`` takes the flow input; several inputs are a fan-in
(their rows are unioned). ``FlowSpec.build()`` validates everything (operators, params,
inputs and cycles: ``flows.spec_graph``; fusion branches: ``flows.spec_checks``) before
anything runs, raising a ``SpecError`` that names the step and the field (``flows.spec_errors``). One step's
spec (``StepSpec``, ``Placement``) is ``flows.step_spec``.

The mosaicRAG request body (``query``, ``parameters``, numbered steps ``"1"``,
``"2"``... each with ``id`` and ``parameters``) is read by ``from_mosaic`` as a
linear flow; its step ids may be operator names or registered aliases.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Collection

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from flows import spec_checks, spec_columns, spec_graph
from flows.mosaic_request import is_mosaic_request, mosaic_spec
from flows.spec_errors import operator_class, spec_error, step_field_hint, yaml_bool_hint
from flows.spec_origin import SpecOrigin
from flows.specfile import not_a_mapping, read_mapping
from flows.step_spec import Placement, StepSpec, index_param
from operators.base import Operator
from operators.errors import OperatorError, ParamsError, SpecError, TesseraError, UnknownOperatorError
from operators.raised_at import raised_at
from operators.unicode import first_broken_text

#: Most steps a flow may have: far above any real flow, and low enough that validating one stays fast.
MAX_STEPS = 10_000


class FlowSpec(BaseModel):
    """A named DAG of steps, in the order they are written."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field("flow", description="Flow name (used by the cache and saved flows).")
    description: str = Field("", description="What the flow is for.")
    steps: dict[str, StepSpec] = Field(description="Steps by id, in order.")
    output: str | None = Field(None, description="Step whose output is the flow's result (steps it does not read "
                               "are skipped); default: the one step no other step reads.")
    index_settings: dict[str, Any] | None = Field(
        None, description="The settings (operators.store.IndexSettings) of the index the flow builds: an "
        "ingestion flow's (`tessera ingest`), or the one `tessera bench` builds for a flow's unset index steps "
        "(its encoder, say); `tessera run --index` searches the index given, as it was built.")
    #: The file the spec was read from, and its keys' lines: an error found when it is built names them.
    _origin: SpecOrigin | None = PrivateAttr(None)

    @field_validator("index_settings")
    @classmethod
    def _known_settings(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        spec_checks.check_index_settings(value)
        return value

    @field_validator("steps", mode="before")
    @classmethod
    def _step_ids(cls, steps: Any) -> Any:
        spec_checks.check_step_ids(steps)
        return steps

    @field_validator("steps")
    @classmethod
    def _not_empty(cls, steps: dict[str, StepSpec]) -> dict[str, StepSpec]:
        if not steps:
            raise ValueError("a flow needs at least one step")
        if len(steps) > MAX_STEPS:
            raise ValueError(f"a flow has at most {MAX_STEPS:,} steps, this one has {len(steps):,}")
        return steps

    # -- reading and writing --------------------------------------------------

    @classmethod
    def parse(cls, data: dict[str, Any]) -> "FlowSpec":
        """Validate a dict (native or mosaicRAG dialect); errors name the step and field."""
        if not isinstance(data, dict):
            raise not_a_mapping(data)
        broken = first_broken_text(data)
        if broken is not None:  # a YAML file or an HTTP answer could not hold it: refused before it is saved
            raise SpecError(broken[1], field=broken[0] or "spec")
        if is_mosaic_request(data):
            return from_mosaic(data)[0]
        try:
            return cls.model_validate(data)
        except ValidationError as err:
            raise spec_error(err, (cls, StepSpec, Placement), data) from None

    @classmethod
    def load(cls, source: str | Path) -> "FlowSpec":
        """Read a spec from a path, a built-in or saved flow name, or YAML/JSON text (``flows.specfile``)."""
        return load_request(source)[0]

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_defaults=True)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(self.to_json() if path.suffix == ".json" else self.to_yaml(), encoding="utf-8")
        return path

    # -- indices ----------------------------------------------------------------

    def unset_index_steps(self) -> dict[str, type]:
        """Steps whose operator reads an index (a Params field ``index``) left unset, with their classes.

        Built-in retrieval specs leave ``index`` unset so one spec serves every corpus:
        ``tessera run --index``, ``tessera bench`` and the demo fill it in.
        """
        return self.unset_steps("index")

    def unset_steps(self, field: str) -> dict[str, type]:
        """Steps whose operator's Params has ``field`` and the spec leaves it unset, with their classes."""
        found = {}
        for step_id, step in self.steps.items():
            cls = self._operator_class(step_id)
            if field in cls.Params.model_fields and step.params.get(field) is None:
                found[step_id] = cls
        return found

    def named_indices(self) -> dict[str, str]:
        """Steps whose operator reads an index and whose spec names one (``params.index`` set): step -> index."""
        return {step_id: str(step.params["index"]) for step_id, step in self.steps.items()
                if "index" in self._operator_class(step_id).Params.model_fields
                and step.params.get("index") is not None}

    def index_features(self) -> set[str]:
        """What the unset-index steps need from an index: ``bm25`` and/or ``dense``. Each step's operator,
        constructed with its params, says (``Operator.index_needs()``: ``retrieve.multi_hop`` by its
        ``retriever``, the others by their ``index_features``)."""
        features: set[str] = set()
        for step_id, cls in self.unset_index_steps().items():
            features.update(cls(self.steps[step_id].params, step_id=step_id).index_needs())
        return features

    def with_index(self, index: Any) -> "FlowSpec":
        """A copy whose unset ``index`` params name ``index``: a path, an index name, or an index opened in Python
        (``flows.api.Index``, anything with a ``path``)."""
        return self.with_unset("index", index_param(index))

    def with_unset(self, field: str, value: Any, **also: Any) -> "FlowSpec":
        """A copy whose steps that leave ``field`` unset get ``value`` (and the params ``also``)."""
        steps = dict(self.steps)
        for step_id in self.unset_steps(field):
            params = {**steps[step_id].params, **also, field: value}
            steps[step_id] = steps[step_id].model_copy(update={"params": params})
        filled = self.model_copy(update={"steps": steps})
        filled._origin = self._origin  # what is filled in (an index) is no line of the file; the rest is
        return filled

    def __eq__(self, other: object) -> bool:
        """Equal specs say the same: where one was read from (``_origin``) is no part of it."""
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> "FlowSpec":
        """A copy; one whose steps were changed (params set in Python, ``--set``) is no longer the file's, so its
        errors name no line of it."""
        copied = super().model_copy(update=update, deep=deep)
        if update and "steps" in update:
            copied._origin = None
        return copied

    # -- validation -----------------------------------------------------------

    def build(self) -> "Flow":
        """Check operators, params, inputs and cycles; construct (cheap) operators. A spec read from a file names
        the file and the line in its error."""
        try:
            return self._build()
        except (SpecError, OperatorError) as err:
            if self._origin is None:
                raise
            raise self._origin.locate(err) from err.__cause__

    def _operator_class(self, step_id: str) -> type[Operator]:
        """The class of a step's operator; an unknown one named with the file and line, as ``build`` names it."""
        try:
            return operator_class(step_id, self.steps[step_id].op)
        except UnknownOperatorError as err:
            if self._origin is None:
                raise
            raise self._origin.locate(err) from None

    def _build(self) -> "Flow":
        ids = list(self.steps)
        inputs = spec_graph.step_inputs(self.steps)
        order = spec_graph.run_order(ids, inputs)
        operators: dict[str, Operator] = {}
        for step_id, step in self.steps.items():
            cls = self._operator_class(step_id)
            try:
                operators[step_id] = cls(step.params, step_id=step_id, input_steps=inputs[step_id])
            except ParamsError as err:
                message = yaml_bool_hint(err.message) + step_field_hint(err, cls.name, StepSpec.model_fields)
                raise type(err)(message, step=step_id, op=cls.name,  # its kind kept (NaN's)
                                field=f"steps.{step_id}.{err.field}") from None
            except TesseraError:
                raise
            except Exception as err:  # a plugin's __init__ (one without step_id=): name the step, not a frame here
                raise OperatorError(f"constructing it failed: {type(err).__name__}: {err}{raised_at(err, cls)}",
                                    step=step_id, op=cls.name) from err
            if cls.scope == "source" and step.inputs:
                raise SpecError(f"'{step.op}' is a source and reads no input", step=step_id, field="inputs")
        output = self.output or spec_graph.only_sink(ids, inputs)
        if output not in self.steps:
            raise SpecError(spec_graph.not_a_step("output", output, ids), field="output")
        spec_checks.check_declarations(order, operators)
        spec_checks.check_branches(ids, inputs, operators)
        spec_checks.check_metadata_keys(order, operators)
        spec_checks.check_rankings_kept(order, operators)
        flow = Flow(spec=self, order=order, inputs=inputs, operators=operators, output=output)
        flow.check_columns(None)
        flow.warnings = spec_checks.warn_unfused_fan_ins(self.name, inputs, operators)
        return flow


@dataclass
class Flow:
    """A validated flow: operators constructed, steps in a runnable order."""

    spec: FlowSpec
    order: list[str]
    inputs: dict[str, tuple[str, ...]]
    operators: dict[str, Operator]
    output: str
    consumers: dict[str, list[str]] = field(default_factory=dict)
    #: What building found questionable but valid (a fan-in of rankings into a step that does not fuse).
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for step in self.order:
            self.consumers.setdefault(step, [])
            for parent in self.inputs[step]:
                self.consumers.setdefault(parent, []).append(step)

    @property
    def name(self) -> str:
        return self.spec.name

    def needed_steps(self) -> list[str]:
        """Steps the output depends on, in run order (others are skipped)."""
        needed = spec_checks.ancestors(self.output, self.inputs) | {self.output}
        return [s for s in self.order if s in needed]

    def unset_params(self) -> list[SpecError]:
        """What the needed steps leave for a runner to fill in (``Operator.unset_params``), one error each."""
        return [SpecError(f"this step needs {field} set: {what}", step=step, field=f"steps.{step}.{field}")
                for step in self.needed_steps() for field, what in self.operators[step].unset_params().items()]

    def missing_files(self) -> list[SpecError]:
        """The local files the needed steps (and the steps they run inside themselves) read that are not there now
        (``Operator.missing_files``), one error each, named by the field of the step that names the file."""
        return [SpecError(why, step=step, field=f"{where}.{field}")
                for step in self.needed_steps() for where, op in self.operators[step].walk(f"steps.{step}")
                for field, why in op.missing_files().items()]

    def check_columns(self, input_columns: Collection[str] | None) -> None:
        """Refuse, before anything runs, a needed step whose required input columns (``required_columns()``) no step
        above it can bring, given the flow input's columns (None: any). An executor calls it with its input's columns;
        ``FlowSpec.build()`` with None. The error names the step and the param that named the column."""
        if isinstance(input_columns, (str, bytes)):  # "qid" was read as the columns q, i and d
            raise SpecError(f"input_columns is a collection of column names, not the text {input_columns!r}: "
                            f"give [{input_columns!r}]", field="input_columns")
        self._refuse_first(spec_columns.missing_columns(self.order, self.inputs, self.operators, self.needed_steps(),
                                                       input_columns))

    def check_filters(self) -> None:
        """Refuse, before anything runs, a needed retriever whose ``filter`` names a column its index does not hold
        (``spec_checks.filters_outside_index``). An executor asks it before the first step (``check_input``);
        building or saving a flow does not: a flow saved for its index's columns may search another index than the
        one known then."""
        self._refuse_first([error for step in self.needed_steps()
                            for error in spec_checks.filters_outside_index(step, self.operators[step])])

    def check_input(self, input_columns: Collection[str]) -> None:
        """What an executor refuses before the first step runs: a column no step above can bring from its input's
        ``input_columns`` (``check_columns``), a retriever's filter on a column its index lacks (``check_filters``)."""
        self.check_columns(input_columns)
        self.check_filters()

    def _refuse_first(self, errors: list[SpecError]) -> None:
        """Raise the first of ``errors``, located in the spec's file where it was read from one."""
        if errors:
            raise errors[0] if self.spec._origin is None else self.spec._origin.locate(errors[0])

    def ranks(self) -> bool:
        """Whether the output is a ranking: a needed step writes a ``rank`` column."""
        return "rank" in self.roles().values()

    def roles(self) -> dict[str, str]:
        """Column roles declared by the steps the output depends on, later steps winning."""
        roles: dict[str, str] = {}
        for step in self.needed_steps():
            roles.update(self.operators[step].produces())
        return roles

    def step_option(self, step: str, name: str) -> Any:
        """A resource hint: the step's override if set, else the operator's default."""
        value = getattr(self.spec.steps[step], name)
        return getattr(self.operators[step], name) if value is None else value


def load_request(source: str | Path) -> tuple[FlowSpec, str | None]:
    """A spec (as ``FlowSpec.load``) and, when it is a mosaicRAG request, the request's query. An invalid spec
    read from a file names the file, as a syntax error does."""
    data, path = read_mapping(source)
    try:
        if is_mosaic_request(data):
            spec, query = from_mosaic(data, name=path.stem if path is not None else "mosaic")
        else:
            spec, query = FlowSpec.parse(data), None
    except SpecError as err:
        if path is None:
            raise
        raise SpecOrigin.of(path).locate(err) from None
    if path is not None and _names_file(source, path):  # a user's file, not a built-in or saved flow's name
        spec._origin = SpecOrigin.of(path)
    return spec, query


def from_mosaic(body: dict[str, Any], *, name: str = "mosaic") -> tuple[FlowSpec, str | None]:
    """Read a mosaicRAG task body as a linear flow (``flows.mosaic_request``); returns the spec and the query."""
    spec, query = mosaic_spec(body, name=name)
    return FlowSpec.parse(spec), query


def _names_file(source: str | Path, path: Path) -> bool:
    """Whether ``source`` is the file's path itself: a flow's name (a built-in's file is the service's) is not."""
    try:
        return Path(source).is_file() and Path(source).samefile(path)
    except (OSError, ValueError):
        return False
