"""One step of a flow spec (``StepSpec``: its operator, params, inputs and resource overrides; ``Placement``: where
its model runs), and an ``index`` param as a spec holds it (``index_param``). Apart from ``flows.spec`` so that the
flow (its steps' graph, building, loading) reads alone; ``flows.spec`` re-exports all three."""

from __future__ import annotations

import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from operators.params import bool_refusal


class Placement(BaseModel):
    """Where a step's model runs when not in the flow's process: a Ray Serve deployment (see flows/placement.py)."""

    model_config = ConfigDict(extra="forbid")

    deployment: str = Field(min_length=1, description="Serve deployment hosting the step's model (a model name "
                            "of the Serve config, which tessera serve --print-config shows, e.g. "
                            "'tessera-cross-encoder').")
    app: str = Field("tessera", min_length=1, description="Serve application the deployment belongs to.")


class StepSpec(BaseModel):
    """One step: an operator, its params, where its input comes from, and overrides."""

    model_config = ConfigDict(extra="forbid")

    op: str = Field(description="Registered operator name, e.g. 'analyze.word_count'.")
    params: dict[str, Any] = Field(default_factory=dict, description="The operator's params.")
    inputs: list[str] | None = Field(
        None, description="Steps whose output this step reads; omitted: the previous step; []: the flow input."
    )
    cache: bool = Field(True, description="Use the step cache for this step.")
    num_gpus: float | None = Field(None, ge=0, allow_inf_nan=False, description="Override the operator's GPU hint.")
    num_cpus: float | None = Field(None, gt=0, allow_inf_nan=False, description="Override the operator's CPU hint.")
    batch_size: int | None = Field(None, gt=0, description="Override the operator's batch size.")
    concurrency: int | None = Field(None, gt=0, description="Override the operator's actor pool size.")
    placement: Placement | None = Field(
        None, description="Run the step's model on this Ray Serve deployment (through a deployment handle) "
        "instead of in-process; same output. Embedders and rerankers; the local executor (the one Serve runs "
        "flows with) honours it, the Ray Data executor refuses it.")

    @field_validator("*", mode="before")
    @classmethod
    def _not_a_bool(cls, value: Any, info: ValidationInfo) -> Any:
        """A boolean in a number field (``batch_size: yes``), refused as a param's is (``bool_refusal``)."""
        if problem := bool_refusal(cls.model_fields[info.field_name].annotation, value):
            raise ValueError(problem)
        return value

    @field_validator("params", mode="before")
    @classmethod
    def _null_params(cls, params: Any) -> Any:
        """``params:`` left empty in YAML is null: no params, as ``{}``. An ``index`` given in Python as a
        ``pathlib.Path`` or an ``Index`` is its path's text (``index_param``), as ``Flow.load``'s ``index=`` is."""
        if isinstance(params, dict) and "index" in params:
            return {**params, "index": index_param(params["index"])}  # a copy: the caller's dict is left as it was
        return {} if params is None else params


def index_param(index: Any) -> Any:
    """An ``index`` param as a spec holds it: the text of a path, or of an index opened in Python (``flows.api.Index``,
    anything with a ``path``); anything else as it is, for the params' validation to word."""
    index = getattr(index, "path", index)
    if not isinstance(index, os.PathLike):
        return index
    from operators.store.layout import resolve_index  # here: operators.store's import is 0.1 s of every command's

    # absolute, as resolve_index makes a Path: the text of Path("./idx") is "idx", which read again would be a name
    return str(resolve_index(index))
