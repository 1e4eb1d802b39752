"""A flow request's parts that need no service: the native bodies, the cut to ``top_k`` and the checks of a built
flow (``Service.prepare`` runs them in its steps, serve/service.py)."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from typing import Any, Iterator

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from flows.spec import FlowSpec, StepSpec, is_mosaic_request
from operators.errors import SpecError, first_validation_problem
from operators.json_tree import json_kind
from serve.http.errors import ApiError
from serve.schemas import Text

log = logging.getLogger("tessera.serve")


class FlowRequest(BaseModel):
    """Tessera's native body: a flow (name or inline spec) and its queries."""

    model_config = ConfigDict(extra="forbid")

    flow: str | dict[str, Any] = Field("hybrid", description="A built-in or saved flow name, or an inline spec.")
    query: Text | None = Field(None, description="One query (at most max_query_chars characters).")
    queries: list[Text] | None = Field(None, description="Several queries (at most max_queries_per_request, each "
                                       "at most max_query_chars characters).")
    index: str | None = Field(None, description="Index for retrieval steps that name none; default: the app's.")
    top_k: int | None = Field(None, gt=0, strict=True, description="Keep the best top_k rows per query of a flow "
                              "that ranks (retrieval steps fetch at least that many); default: every row the flow "
                              "gives.")
    params: dict[str, Any] | None = Field(None, description="Steps' params for this request, named STEP.PARAM "
                                          "(`{\"dense.k\": 50, \"answer.model\": \"gemma2\"}`), as "
                                          "`tessera run --set` sets them.")

    @field_validator("flow", mode="before")
    @classmethod
    def _name_or_spec(cls, flow: Any) -> Any:
        """One message naming ``flow`` (pydantic's union named ``flow.str`` and ``flow.dict[str,any]``)."""
        if not isinstance(flow, (str, dict)):
            raise ValueError(f"a flow's name (a string) or an inline spec (an object), not {json_kind(flow)}")
        return flow

    @field_validator("index")
    @classmethod
    def _named(cls, index: str | None) -> str | None:
        if index is not None and not index.strip():  # "" searched the default index, as if none were named
            raise ValueError("an index's name or path, not empty; leave index out for the app's default index")
        return index


class SearchRequest(FlowRequest):
    """``POST /v1/search``: a flow's top ``top_k`` hits per query."""

    top_k: int | None = Field(10, gt=0, strict=True, description="Hits per query.")


@dataclass
class Asked:
    """What a body asks for (``Service.read_body``): the flow's spec, the queries' texts, the index and the cut;
    ``built``: the spec built, when reading the body needed that (a search), for the cut to reuse; ``query_field``:
    the body's field of the queries (`queries` when it sent that), which a refusal of none names."""

    spec: FlowSpec
    texts: list[Any]
    index: str | None = None
    top_k: int | None = None
    built: Any = None
    query_field: str = "query"


@contextlib.contextmanager
def named_as_sent(body: Any) -> Iterator[None]:
    """A mosaicRAG body's refusal names its field as the client wrote it (``2.parameters.k``, ``2.id``), not the
    flow Tessera made of it (``steps.2.params.k``), which the client never saw. A value is quoted as JSON writes it
    for every body (``serve.http.json_values``)."""
    mosaic = isinstance(body, dict) and is_mosaic_request(body)
    try:
        yield
    except (SpecError, ApiError) as err:
        if mosaic:
            where = "field" if isinstance(err, SpecError) else "param"
            field, sent = getattr(err, where), mosaic_field(getattr(err, where), body)
            setattr(err, where, sent)
            if isinstance(err, ApiError) and field and err.message.startswith(f"{field}: "):
                err.message = sent + err.message[len(field):]
        raise


def mosaic_field(field: str | None, body: dict[str, Any]) -> str | None:
    """``steps.N.params.P`` as ``N.parameters.P`` (``parameters.P`` where the top-level ``parameters`` gave it to
    step 1), ``steps.N.op`` as ``N.id``; another field as it is."""
    step, _, rest = (field or "").removeprefix("steps.").partition(".")
    if not (field or "").startswith("steps.") or not isinstance(body.get(step), dict):
        return field
    if rest == "op":
        return f"{step}.id"
    if rest == "params" or rest.startswith("params."):
        param = rest.removeprefix("params").removeprefix(".")
        own = body[step].get("parameters")
        top = step == "1" and param and isinstance(body.get("parameters"), dict) and not (
            isinstance(own, dict) and param.split(".")[0] in own) and param.split(".")[0] in body["parameters"]
        return ".".join(filter(None, ["parameters" if top else f"{step}.parameters", param]))
    return field


def validation_error(err: ValidationError) -> SpecError:
    """The first problem pydantic found in a body, as a 422 naming its field."""
    _, field, message = first_validation_problem(err)
    return SpecError(message, field=field or "body")


def with_top_k(spec: FlowSpec, top_k: int, built: Any = None) -> FlowSpec:
    """``spec`` cut to the best ``top_k`` rows per query; retrieval steps fetch at least that many. ``built``:
    ``spec`` built already, if it was (the cut reads whether it ranks and its output)."""
    built = spec.build() if built is None else built
    if not built.ranks():  # no hits to cut: an answer without search (answer_only), a flow that writes an index
        return spec
    steps = {sid: (s if not (s.op.startswith("retrieve.") and isinstance(s.params.get("k"), int))
                   else s.model_copy(update={"params": {**s.params, "k": max(s.params["k"], top_k)}}))
             for sid, s in spec.steps.items()}
    name = "search_top_k" if "search_top_k" not in steps else "search_top_k_"
    cited = [built.operators[s].params.cited_column for s in built.needed_steps()
             if built.operators[s].name == "generate.answer"]  # the rows an answer cites stay: its sources are hits
    keep = {"keep_column": cited[-1]} if cited else {}
    steps[name] = StepSpec(op="postprocess.reduce", params={"k": top_k, **keep}, inputs=[built.output])
    return spec.model_copy(update={"steps": steps, "output": name})


def refuse_reading_documents(flow: Any) -> None:
    """A 422 for a search with a flow that reads documents (``ingest``: its first step is a source) rather than
    searching for queries; running it would index the documents the spec names."""
    for step in flow.needed_steps():
        if flow.operators[step].scope == "source":
            raise ApiError(422, f"flow '{flow.name}' reads documents (step '{step}', {flow.operators[step].name}) "
                           "instead of searching for queries: add documents to an index with POST "
                           "/v1/indices/{name}/documents or /v1/indices/{name}/files", param="flow",
                           code="not_a_search_flow")


def refuse_missing_files(flow: Any) -> None:
    """A 422 naming the first local file the flow reads that is not there (a corpus file deleted or never made),
    before anything runs: the run would fail at that step with the same words. Asked apart from the cached checks of
    ``GET /flows`` (``serve.runs.flow_status``), since a file comes and goes without the flow's spec changing."""
    for missing in flow.missing_files():
        raise ApiError(422, public_text(missing), param=missing.field, code="flow_not_runnable")


def refuse_missing_columns(flow: Any, queries: list[dict[str, Any]]) -> None:
    """A 422 naming the first needed step whose input columns no step above it brings from a task's ``queries``
    (``generate.answer`` with no ``generate.context`` in front of it), before the task is queued: the task failed
    with these words once it ran, where ``/v1/search`` refuses the same flow. Chats add columns of their own (the
    conversation, a task's rows) and are checked when they run."""
    columns = sorted({name for query in queries for name in query}) or ["qid", "query"]
    with _not_runnable():
        flow.check_columns(columns)


def refuse_filters_outside_index(flow: Any) -> None:
    """A 422 naming the first needed retriever whose ``filter`` names a column its index does not hold, before a task
    is queued: the task failed at its start, where ``/v1/search`` refuses the same flow (``Flow.check_filters``; not
    asked when a flow is saved, since it may be meant for an index made later)."""
    with _not_runnable():
        flow.check_filters()


@contextlib.contextmanager
def _not_runnable() -> Iterator[None]:
    """A spec check's refusal as the request's 422 ``flow_not_runnable``, naming its field."""
    try:
        yield
    except SpecError as err:
        raise ApiError(422, public_text(err), param=err.field or "flow", code="flow_not_runnable") from None


def check_models_here(flow: Any) -> None:
    """Every model the flow's unplaced steps load is on this machine, else a 404 naming each (with the command that
    makes it), before anything runs; one of another kind than its step loads (a bi-encoder or a language model's
    alias for ``rerank.cross_encoder``) is a 422 ``wrong_model_kind`` naming the first such field; an index embedded
    with another encoder than the flow's is a 422. Every
    environment variable they read (``rerank.api``'s ``api_key_env``, a language model alias's key) is set here,
    else a 422 ``env_not_set`` naming the step and the variable (never a value): accepted, the task would fail at
    that step, after the retrieval in front of it. A model on a server that does not answer (Ollama, an alias's
    ``api_base``) is a 503 ``model_unreachable``. Which variables a spec may name at all is the spec guard's
    (``serve/security/spec_guard.py``, ``TESSERA_ALLOW_ENV``), checked before this."""
    from flows.model_check import IndexEncoderError, MissingEnvError, MissingModelsError, check_env, check_models
    from flows.train import public_train_command
    from operators.errors import SettingError
    from operators.extras import MissingExtraError
    from operators.llm.reachable import ModelUnreachableError

    try:  # the command that makes a model, its dataset by a stand-in: the recipe's path is the clone's layout
        check_models([flow], how_to_make=public_train_command)
    except IndexEncoderError as err:  # the 422 of a SpecError, its encoders named without the server's paths
        raise IndexEncoderError(logged_public(err), step=err.step, field=err.field) from None
    except MissingModelsError as err:
        if err.wrong_kind:  # the spec's mistake (a language model's alias for a cross-encoder): a 422 naming the field
            raise wrong_kind_error(err) from None
        raise ApiError(404, logged_public(err), param="flow", code="model_not_found") from None
    try:
        check_env(flow)
    except MissingExtraError as err:  # the server's install, not the request
        raise ApiError(503, f"the flow was not run: {err.message}", kind="server_error",
                       code="extra_not_installed") from None
    except ModelUnreachableError as err:  # its model server down: each answer would fail after the retrieval
        raise ApiError(503, f"the flow was not run: {err}", kind="server_error", code="model_unreachable",
                       param=err.field) from None  # the step's model field, which a client (the web UI) names
    except SettingError as err:  # the server's own setting ($TESSERA_LLM_THREADS), not the request's
        raise ApiError(503, f"a setting of the service is wrong, so the flow was not run: {err.message}",
                       kind="server_error", code="setting_invalid") from None
    except MissingEnvError as err:
        named = ", ".join(f"${variable} (step {step}, {where})" for step, where, variable in err.missing)
        raise ApiError(422, f"flow '{flow.name}' reads {named}, not set where this service runs, so it was not "
                       "run: whoever runs the service must set it", param=err.field or "flow",
                       code="env_not_set") from None


def logged_public(err: Any) -> str:
    """A model error's message for the client, worded without the server's paths (``ModelNotFoundError.public``:
    the model named as the spec or the config named it); the message with them goes to the log, by request id."""
    from serve.http.errors import request_id

    if err.public != err.message:
        log.info("request %s: %s", request_id(), err.message)
    return err.public


def public_text(err: Any) -> str:
    """An error's text for the client: a model error's public message in place of its own (``logged_public``) and
    no other path of the server (an upload's refused ingestion named the model repository's folder)."""
    from serve.http.server_paths import without_server_paths

    if getattr(err, "public", None) is not None:  # worded without paths already ($TESSERA_HOME/models stays)
        return str(err).replace(err.message, logged_public(err))
    return without_server_paths(str(err))


def wrong_kind_error(err: Any) -> ApiError:
    """The 422 ``wrong_model_kind`` of a ``MissingModelsError`` with models of another kind than their step loads,
    naming the first such field."""
    return ApiError(422, logged_public(err), param=err.wrong_kind[0].field, code="wrong_model_kind")


def check_model_kinds(flow: Any) -> None:
    """The 422 ``wrong_model_kind`` a run of ``flow`` answers for a model its spec names (a step's param, its
    ``index_settings.encoder``) that is here but of another kind than its step loads, with only those models
    named. A model that is not here is no refusal (a flow saved before ``tessera train`` makes its model), nor is
    the encoder an index records (the index's, not the spec's)."""
    from flows.model_check import INDEX_ENCODER, MissingModelsError, check_model, flow_needs
    from operators.models.references import ModelNotFoundError, WrongModelKindError

    wrong: dict[str, list[Any]] = {}
    reasons: dict[str, WrongModelKindError] = {}
    for need in flow_needs(flow):
        if need.where.endswith(INDEX_ENCODER):
            continue
        try:
            check_model(need.reference, need.kind)
        except WrongModelKindError as err:
            wrong.setdefault(need.reference, []).append(need)
            reasons.setdefault(need.reference, err)
        except ModelNotFoundError:
            continue
    if wrong:
        raise wrong_kind_error(MissingModelsError(
            wrong, {ref: err.message for ref, err in reasons.items()}, wrong_kind=wrong,
            public_reasons={ref: err.public for ref, err in reasons.items()}))
