"""The application builder's arguments: which models to serve and how (``args`` in serve/config.yaml).

Each entry of ``models`` becomes one Serve deployment hosting a registered operator
(``embed.sentence_transformer`` or any reranker: ``rerank.cross_encoder``,
``rerank.colbert``...). The entry's ``name`` is what clients send as ``model`` and, by
default, the deployment's name (what a flow step's ``placement.deployment`` names).
"""

from __future__ import annotations

import contextlib
import re
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from operators.errors import SpecError, first_validation_problem, shown_value, unknown_name_hint, value_problem

from serve.service_settings import SETTINGS, ApiKey, Limits, ServiceArgs

_DEPLOYMENT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*\Z")


class Batching(BaseModel):
    """``@serve.batch`` settings of a model deployment (live-updatable through ``user_config``)."""

    model_config = SETTINGS

    max_batch_size: int = Field(16, gt=0, description="Most requests merged into one model call.")
    batch_wait_timeout_s: float = Field(0.005, ge=0, description="How long the first request of a batch waits "
                                        "for others before the batch runs.")


class Autoscaling(BaseModel):
    """Replica autoscaling of a model deployment (Serve's ``autoscaling_config``)."""

    model_config = SETTINGS

    min_replicas: int = Field(1, ge=0, description="Fewest replicas (0 lets an idle deployment scale to zero).")
    max_replicas: int = Field(1, ge=1, description="Most replicas.")
    target_ongoing_requests: float = Field(4, gt=0, description="Ongoing requests per replica the autoscaler "
                                           "aims for.")

    @model_validator(mode="after")
    def _ordered(self) -> "Autoscaling":
        if self.max_replicas < self.min_replicas:
            raise ValueError(f"max_replicas ({self.max_replicas}) is below min_replicas ({self.min_replicas})")
        return self


class ModelDeploymentArgs(BaseModel):
    """One served model: the operator that hosts it, its params, and the deployment's resources."""

    model_config = SETTINGS

    name: str = Field(min_length=1, description="Model name clients send (`model` in the request bodies).")
    op: str = Field(description="Registered operator hosting the model: embed.sentence_transformer or a reranker "
                    "(rerank.cross_encoder, rerank.colbert, ...).")
    params: dict[str, Any] = Field(default_factory=dict, description="The operator's params (model reference, "
                                   "max_length...); validated like a flow step's.")
    aliases: list[str] = Field(default_factory=list, description="Other names clients may send for this model.")
    deployment: str | None = Field(None, description="Serve deployment name; default: `name`.")
    batching: Batching = Field(default_factory=Batching, description="Request batching of the model calls.")
    autoscaling: Autoscaling = Field(default_factory=Autoscaling, description="Replica autoscaling.")
    max_ongoing_requests: int = Field(64, gt=0, description="Requests a replica accepts at once (must exceed "
                                      "max_batch_size for batches to fill).")
    num_cpus: float = Field(1, ge=0, description="CPUs reserved per replica (also its torch thread count).")
    num_gpus: float = Field(0, ge=0, description="GPUs per replica (1 on a GPU cluster: the autoscaler starts a "
                            "GPU node when none is up; a fraction shares one GPU). 0 runs on CPUs.")

    @property
    def deployment_name(self) -> str:
        return self.deployment or self.name

    @field_validator("num_gpus", mode="before")
    @classmethod
    def _no_auto(cls, value: Any) -> Any:
        if value == "auto":  # decided from the GPUs up at build time, so a GPU group at zero gave CPU replicas
            raise ValueError("'auto' is not accepted: set 1 for GPU replicas (the autoscaler starts a GPU node "
                             "if none is up) or 0 for CPU replicas")
        return value

    @model_validator(mode="after")
    def _valid_deployment_name(self) -> "ModelDeploymentArgs":
        if not _DEPLOYMENT_NAME.match(self.deployment_name):
            field = "deployment" if self.deployment else "name"
            raise ValueError(f"{field} '{self.deployment_name}' is not a usable deployment name (letters, digits, "
                             "'_', '.', '-'); set `deployment` to one")
        return self


class LLMDeploymentArgs(BaseModel):
    """One served language model behind ``/v1/chat/completions`` (serve/deployments/llm.py says how each
    engine runs it)."""

    model_config = SETTINGS

    name: str = Field(min_length=1, description="Model name clients send (`model`); also the deployment's name.")
    aliases: list[str] = Field(default_factory=list, description="Other names clients may send for this model.")
    engine: Literal["llama_cpp", "vllm"] = Field(
        "llama_cpp", description="llama_cpp: a GGUF model on CPU replicas (one sequence at a time each); vllm: "
        "ray.serve.llm's vLLM deployment (GPU nodes, the `gpu` extra).")
    model: str = Field("smollm2-135m-instruct", min_length=1, description="llama_cpp: a packaged GGUF name or a "
                       ".gguf path; vllm: the model source (a Hugging Face id or a local folder).")
    threads: int = Field(1, gt=0, description="llama_cpp: llama.cpp threads per replica.")
    num_cpus: float | None = Field(None, ge=0, description="llama_cpp: CPUs a replica reserves; default `threads`.")
    engine_kwargs: dict[str, Any] = Field(default_factory=dict, description="vllm: vLLM engine arguments "
                                          "(max_model_len, tensor_parallel_size, ...).")
    accelerator_type: str | None = Field(None, description="vllm: the GPU type Ray places replicas on (A10G...).")
    autoscaling: Autoscaling = Field(default_factory=Autoscaling, description="Replica autoscaling.")
    max_ongoing_requests: int = Field(4, gt=0, description="Requests a replica holds at once (llama_cpp runs "
                                      "them one after another; the rest go to other replicas).")

    @property
    def deployment_name(self) -> str:
        return self.name

    @property
    def context_window(self) -> int | None:
        """The tokens the model reads and writes at once, where the config says (a chat's ``max_tokens`` is bounded
        by it): llama_cpp loads every model with ``CONTEXT_TOKENS``; vllm with ``engine_kwargs.max_model_len``, or
        without it the model's own length, which the engine reads from the model (None: not known here)."""
        if self.engine == "vllm":
            return self.engine_kwargs.get("max_model_len")
        from operators.llm.embedded_model import CONTEXT_TOKENS

        return CONTEXT_TOKENS

    @field_validator("name")
    @classmethod
    def _usable(cls, value: str) -> str:
        if not _DEPLOYMENT_NAME.match(value):
            raise ValueError(f"'{value}' is not a usable deployment name (letters, digits, '_', '.', '-')")
        return value

    @field_validator("engine_kwargs")
    @classmethod
    def _whole_max_model_len(cls, value: dict[str, Any]) -> dict[str, Any]:
        """vLLM's ``max_model_len`` is a number of tokens (a chat's ``max_tokens`` is checked against it)."""
        length = value.get("max_model_len")
        if length is not None and (type(length) is not int or length <= 0):
            raise ValueError(f"max_model_len must be a whole number of tokens above 0, got {length!r}")
        return value


class AppArgs(BaseModel):
    """Arguments of ``serve.app:build_app``."""

    model_config = SETTINGS

    models: list[ModelDeploymentArgs] = Field(default_factory=list, description="Models to deploy.")
    llms: list[LLMDeploymentArgs] = Field(default_factory=list, description="Language models served by "
                                          "/v1/chat/completions.")
    api_deployment: str = Field("api", description="Name of the HTTP ingress deployment.")
    api_num_cpus: float = Field(0, ge=0, description="CPUs reserved by the HTTP ingress replica.")
    service: ServiceArgs | None = Field(default_factory=ServiceArgs, description="The flow routes (tasks, search, "
                                        "saved flows, chat): default index, task store, API keys, limits; null "
                                        "serves the models only.")
    missing_models: Literal["skip", "fail"] = Field(
        "skip", description="A model whose weights or operator are absent: 'skip' starts the app without it "
        "(logged; /v1/models lists it as missing with the reason), 'fail' stops the build with the reason.")

    @field_validator("models")
    @classmethod
    def _unique(cls, models: list[ModelDeploymentArgs]) -> list[ModelDeploymentArgs]:
        seen: dict[str, str] = {}
        for model in models:
            for key in (model.name, *model.aliases):
                if key in seen:
                    raise ValueError(f"model name '{key}' is used twice ({seen[key]} and {model.name})")
                seen[key] = model.name
        deployments = [m.deployment_name for m in models]
        dup = sorted({d for d in deployments if deployments.count(d) > 1})
        if dup:
            raise ValueError(f"deployment name(s) {dup} used twice")
        return models

    @model_validator(mode="after")
    def _unique_names(self) -> "AppArgs":
        seen: dict[str, int] = {}
        entries = [*self.models, *self.llms]
        for i, entry in enumerate(entries):
            for key in {entry.name, *entry.aliases, entry.deployment_name}:
                if seen.setdefault(key, i) != i:
                    raise ValueError(f"name '{key}' is used twice ({entries[seen[key]].name} and {entry.name})")
        return self


class ServeConfigError(SpecError):
    """The application builder's args are invalid (the message names the field)."""


def parse_args(args: dict[str, Any] | AppArgs) -> AppArgs:
    """``args`` as ``AppArgs``; the first problem as a ``ServeConfigError`` naming its field (``tessera serve`` asks
    this before it starts Ray, the app's builder again when it deploys)."""
    if isinstance(args, AppArgs):
        return args
    try:
        return AppArgs.model_validate(dict(args or {}))
    except ValidationError as err:
        first, field, message = first_validation_problem(err)
        if first["type"] in _KIND_ERRORS:
            message = value_problem(first, err.errors()) + _quoted_hint(first)
        elif first["type"] == "extra_forbidden":
            message += _unknown_setting_hint(first["loc"])
        raise ServeConfigError(message + _key_named(args, first["loc"]), field=field or "args") from None


#: Each section of ``args`` (``*``: an entry of a list) and its model: where an unknown setting's close names come
#: from, and where a setting put in the wrong section belongs.
_SECTIONS: dict[str, type[BaseModel]] = {
    "": AppArgs, "service": ServiceArgs, "service.limits": Limits, "service.api_keys.*": ApiKey,
    "models.*": ModelDeploymentArgs, "models.*.batching": Batching, "models.*.autoscaling": Autoscaling,
    "llms.*": LLMDeploymentArgs, "llms.*.autoscaling": Autoscaling}


def _unknown_setting_hint(loc: tuple) -> str:
    """What to write instead of an unknown setting: where it belongs when another section has it (``max_tasks`` put
    in ``args`` rather than ``args.service.limits``), else its close names and the section's settings. The bare
    "unknown field" left the operator to find both."""
    name, section = str(loc[-1]), ".".join("*" if isinstance(part, int) else str(part) for part in loc[:-1])
    model = _SECTIONS.get(section)
    if model is None:
        return ""
    elsewhere = [f"args.{other}" if other else "args" for other, found in _SECTIONS.items()
                 if other != section and name in found.model_fields]
    if elsewhere:
        return f"; '{name}' is a setting of {' or '.join(elsewhere)}: move it there"
    if section == "" and (serve_place := _serve_setting_place(name)):
        return f"; '{name}' is Serve's setting of {serve_place}, not an argument of the app: move it there"
    return unknown_name_hint(name, model.model_fields, "settings")


def _serve_setting_place(name: str) -> str | None:
    """Where Serve's own config has ``name`` (``host`` or ``port`` put under ``args``), from Ray's schema classes."""
    from ray.serve.schema import HTTPOptionsSchema, ServeApplicationSchema

    for place, schema in (("http_options", HTTPOptionsSchema), ("the application (beside args)",
                                                                ServeApplicationSchema)):
        if name in schema.model_fields and name != "args":
            return place
    return None


#: Pydantic's errors of a value of the wrong kind (strict: ``SETTINGS``), said as "must be true or false (got 'yes')".
_KIND_ERRORS = {"bool_type", "int_type", "float_type", "string_type", "list_type", "dict_type", "model_type"}


def _quoted_hint(error: dict) -> str:
    """A boolean or a number written as text (quoted in YAML: ``admin: "yes"``, ``max_tasks: "8"``): say how to
    write the value itself."""
    text = error.get("input")
    if error["type"] == "bool_type" and isinstance(text, str) and text.strip().lower() in _BOOL_WORDS:
        return "; a setting takes YAML's own true or false: write it without quotes"
    if error["type"] in ("int_type", "float_type") and isinstance(text, str):
        with contextlib.suppress(ValueError):
            float(text)
            return "; a setting takes YAML's own number: write it without quotes"
    return ""


#: What a boolean written as text may look like (pydantic's lax mode read each as one).
_BOOL_WORDS = {"true", "false", "yes", "no", "on", "off", "y", "n", "t", "f", "1", "0"}


def _key_named(args: Any, loc: tuple) -> str:
    """`` (key 'alice')`` for a problem inside an entry of ``service.api_keys``: the entry's id, which its author
    knows it by (the field names its place in the list only)."""
    if tuple(loc[:2]) != ("service", "api_keys") or len(loc) < 3 or not isinstance(loc[2], int):
        return ""
    try:
        key_id = args["service"]["api_keys"][loc[2]]["id"]
    except (KeyError, IndexError, TypeError):
        return ""
    return f" (key {shown_value(key_id)})" if loc[3:] != ("id",) else ""
