"""What a flow from the network may not name besides indices and files (``serve/indices/index_roots.py``): the
server's environment variables, language models other than the service's aliases, model folders outside
the model repository, regular expressions other than a param's default, and a torch ``device`` (any operator's
param of that name: ``cuda:7`` on a machine without it failed the step's setup, a 500); nor may it hold a key
itself.

Why: a step that reads a key from the environment (``rerank.api``'s ``api_key_env``, ``sources.mosaic``'s
``password_env``) sends it where its spec says, so a client naming ``TESSERA_API_KEYS`` would have every
tenant's key sent to its own URL; a litellm model string reaches its provider's default address (Ollama's
``localhost:11434``), which the outbound guard never sees; and a model path loads whatever folder or GGUF
file the server can read. So a flow that the service runs may name:

* an environment variable listed in ``TESSERA_ALLOW_ENV`` (comma-separated, set by whoever runs the
  service), never ``TESSERA_API_KEYS``;
* a language model by alias (``tessera models``; ``$TESSERA_MODELS`` adds the service's own), or a packaged
  embedded model (``tessera/smollm2-135m-instruct``);
* a model for a step (an encoder, a reranker) by name: packaged, trained into ``$TESSERA_HOME/models``, or a
  Hugging Face id in the local cache, but a path only inside ``$TESSERA_HOME/models``.

It may hold no key itself (``rerank.api``'s ``api_key``): a saved flow and a task keep the spec as sent, so the
key would be stored in clear; it comes from an environment variable the spec names (``api_key_env``) instead. Nor
may the headers a step sends (``rerank.api``'s ``user_headers``) name one that carries a credential
(``CREDENTIAL_HEADERS``, by name: what a value looks like is no rule).

Each refusal is a 422 naming the field. Params are marked in their operator (``operators/local_files.py``).
A flow saved by the CLI may hold a key all the same (a spec of one's own): the service shows it with the key
replaced (``redacted``), found by the rule that refuses it (``written_keys``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterator

from pydantic import SecretStr

from flows.spec import FlowSpec
from operators.errors import one_line
from operators.local_files import marked_params
from serve.http.errors import ApiError

#: Where the service's operator lists the environment variables a spec may name.
ALLOW_ENV = "TESSERA_ALLOW_ENV"
#: Never named by a spec, whatever ALLOW_ENV says: the service's own keys.
NEVER_ENV = frozenset({"TESSERA_API_KEYS"})


def check_flow(flow: Any) -> None:
    """A 422 for the first step of the built ``flow`` that names what a served flow may not (module docstring)."""
    for step in flow.needed_steps():
        check_operator(flow.operators[step], f"steps.{step}")


#: Header names (lower case, ``_`` read as ``-``) that carry a credential: HTTP's own (RFC 9110, RFC 6265) and the
#: API-key headers of the common hosted APIs (AWS API Gateway/Anthropic/Pinecone's ``x-api-key``, Azure's ``api-key``
#: and ``ocp-apim-subscription-key``, Google's ``x-goog-api-key``, OpenStack's ``x-auth-token``). ``rerank.api``
#: refuses ``Authorization`` itself, everywhere.
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key",
                                "x-goog-api-key", "ocp-apim-subscription-key", "x-auth-token"})


def check_operator(operator: Any, where: str) -> None:
    """A 422 when ``operator`` (at ``where``: ``steps.rerank``), or one it runs inside itself
    (``retrieve.multi_collection``'s postprocessors: ``Operator.nested_operators``), names what it may not."""
    for place, each in operator.walk(where):
        params = each.params
        for name, header in written_keys(params):
            raise key_in_spec(params, name, f"{place}.params.{name}", header)
        for name in marked_params(type(params), "env_var"):
            check_env(getattr(params, name), f"{place}.params.{name}")
        if getattr(params, "device", None) is not None:
            raise ApiError(422, f"{place}.params.device: this service places models itself (its deployments, its "
                           "devices); leave device out", param=f"{place}.params.device", code="device_not_allowed")
        for name in marked_params(type(params), "regex"):
            check_default_pattern(params, name, f"{place}.params.{name}")
        language_models = marked_params(type(params), "llm_model")
        for name in language_models:
            check_llm(getattr(params, name), f"{place}.params.{name}")
        for field, reference in each.required_models().items():
            # a param the spec set, not an index's recorded encoder (nor a nested step's, checked as its own); nor a
            # language model's: an alias (check_llm) whose .gguf the service's own models file names, which is no
            # path of the request's (a missing one is a 404)
            if re.fullmatch(r"params\.\w+", field) and field.removeprefix("params.") not in language_models:
                check_model_path(reference, f"{place}.{field}")


def is_credential_header(header: Any) -> bool:
    """Whether a header of that name carries a credential (``CREDENTIAL_HEADERS``; any case, ``_`` read as ``-``)."""
    return isinstance(header, str) and header.strip().lower().replace("_", "-") in CREDENTIAL_HEADERS


def written_keys(params: Any) -> Iterator[tuple[str, str | None]]:
    """The keys an operator's ``params`` hold themselves, in order: ``(name, None)`` for a set ``secret()`` param
    (``api_key``), ``(name, header)`` for a header that carries a credential (``is_credential_header``) in a
    ``sent_headers()`` param (``user_headers``). What the guard refuses and ``redacted`` hides: one rule for both."""
    for name in marked_params(type(params), "secret"):
        if getattr(params, name) is not None:
            yield name, None
    for name in marked_params(type(params), "sent_headers"):
        for header in getattr(params, name) or {}:
            if is_credential_header(header):
                yield name, header


def key_in_spec(params: Any, name: str, field: str, header: str | None = None) -> ApiError:
    """The 422 for a key written in a spec, at ``field`` (``written_keys``' ``name`` of ``params``, or its
    ``header``): a saved flow and a task keep their spec as sent, so the key would sit in clear in the flow's YAML and
    the task store. Named, never quoted; a value that is ``REDACTED`` (a spec read back from ``GET /flows/{name}``)
    is said to be one."""
    value = getattr(params, name)
    value = value[header] if header is not None else value
    value = value.get_secret_value() if isinstance(value, SecretStr) else value
    env_param = type(params).model_fields[name].json_schema_extra["env_param"]
    what, leave = "no key written in a spec", name
    if header is not None:
        field, leave = f"{field}.{header}", "the header"
        what = f"no credential in a spec's headers (it refuses {', '.join(sorted(CREDENTIAL_HEADERS))})"
    redacted = (f" ({REDACTED} is what GET /flows/{{name}} shows in place of a key that a flow's file holds: the "
                "key stays in that file, and a flow that holds one is saved with the CLI, `tessera flows save`, "
                "only)") if value == REDACTED else ""
    return ApiError(422, f"{field}: this service takes {what}{redacted}: a saved flow or a task would keep it in "
                    f"clear; leave {leave} out, put the key in an environment variable of the service that its "
                    f"operator lists in {ALLOW_ENV}, and name that variable with {env_param}",
                    param=field, code="key_in_spec")


#: What the service shows in place of a key that a flow's file holds (``redacted``); refused if sent back.
REDACTED = "***redacted***"


def redacted(spec: FlowSpec) -> dict[str, Any]:
    """A ``FlowSpec`` as the service shows it (``GET /flows/{name}``): every key its steps hold themselves
    (``written_keys``, also in the operators a step runs inside itself) replaced by ``REDACTED``. A flow saved by the
    CLI may hold one (``tessera flows save``: a spec of one's own); its file keeps it, the service never shows it. A
    step whose params no longer validate is read as written (``model_construct``), its own params only."""
    from operators.registry import get_operator

    shown = spec.to_dict()
    for step_id, step in spec.steps.items():
        try:
            cls = get_operator(step.op, step=step_id)
        except Exception:  # noqa: BLE001  (an operator gone since the flow was saved: no param of it is known)
            continue
        try:
            places = [(place, each.params) for place, each in cls(step.params, step_id=step_id).walk()]
        except Exception:  # noqa: BLE001  (params that no longer validate: its own, as written)
            places = [("", cls.Params.model_construct(**step.params))]
        for place, params in places:
            for name, header in written_keys(params):
                _hide(shown["steps"][step_id], place.split(".") if place else [], name, header)
    return shown


def _hide(step: dict[str, Any], place: list[str], name: str, header: str | None) -> None:
    """Put ``REDACTED`` in place of the key at ``place`` (``params.postprocess.0``) of ``step``'s dict, in its param
    ``name`` (or that param's ``header``); all of the step's params when ``place`` is not found in it."""
    node: Any = step
    try:
        for part in place:
            node = node[int(part)] if isinstance(node, list) else node[part]
        params = node["params"]
        if header is None:
            params[name] = REDACTED
        else:
            params[name][header] = REDACTED
    except (KeyError, IndexError, TypeError, ValueError):  # a nested operator not written where its field says
        step["params"] = REDACTED


def check_default_pattern(params: Any, name: str, field: str) -> None:
    """A 422 for a regular expression other than the param's default: Python's ``re`` has no timeout and holds the GIL
    while it backtracks, so one pattern (``(\\w+\\s?)+$`` over a long enough text) stopped every request of the
    replica, its health check too."""
    default = type(params).model_fields[name].get_default()
    if getattr(params, name) != default:
        raise ApiError(422, f"{field}: this service runs no regular expression a request sends (one that backtracks "
                       f"would hold the whole service); leave {name} out for its default {default!r}",
                       param=field, code="pattern_not_allowed")


def check_env(name: str | None, field: str) -> None:
    allowed = {n.strip() for n in os.environ.get(ALLOW_ENV, "").split(",") if n.strip()} - NEVER_ENV
    if name is not None and name not in allowed:
        raise ApiError(422, f"{field}: this service reads no environment variable that a request names, unless its "
                       f"operator lists it in {ALLOW_ENV} (it lists {', '.join(sorted(allowed)) or 'none'})",
                       param=field, code="env_not_allowed")


def check_llm(model: str, field: str) -> None:
    from operators.llm.aliases import EMBEDDED_PROVIDER, aliases
    from operators.llm.embedded_model import PACKAGED

    known = aliases()
    if model in known or model.removeprefix(EMBEDDED_PROVIDER + "/") in PACKAGED:
        return
    raise ApiError(422, f"{field}: model '{one_line(model, 60)}' is not an alias of this service; it runs language "
                   f"models by alias only ({', '.join(sorted(known))}; `tessera models` on the server lists them, and "
                   "its $TESSERA_MODELS file adds others)", param=field, code="model_not_allowed")


#: File suffixes of model weights and exports: a reference ending in one names a file, so it is a path.
MODEL_FILE_SUFFIXES = (".gguf", ".bin", ".safetensors", ".onnx", ".pt", ".pth", ".ckpt", ".h5", ".msgpack", ".json")


def looks_like_path(reference: str) -> bool:
    """Whether ``reference`` is written as a path, from its text alone: a name (``all-MiniLM-L6-v2``, a trained
    model's folder name) or a hub id (``org/name``) is not. Deciding by whether the path exists would tell a client
    which files exist on the server (a 422 for one that does, a 404 naming it for one that does not). The loader's
    rule (``references.looks_like_path``), and also a ``..`` part or a model file's suffix, which it reads as a name
    to look up."""
    from operators.models import references

    return (references.looks_like_path(reference) or ".." in reference.replace("\\", "/").split("/")
            or reference.lower().endswith(MODEL_FILE_SUFFIXES))


def check_model_path(reference: str, field: str) -> None:
    """A 422 for a model ``reference`` written as a path outside the model repository, whether or not it exists; the
    message names neither the resolved path nor the working directory."""
    from operators.models.references import models_dir

    repository = models_dir().resolve()
    if looks_like_path(reference):
        try:
            inside = Path(os.path.expanduser(reference)).resolve().is_relative_to(repository)
        except (OSError, RuntimeError, ValueError):  # a symlink loop, a NUL: not a path this service loads
            inside = False
    else:  # a name, unless the loader would open it from the working directory (it tries that first): refused as a
        # path, which leaves the first two levels of the working directory (the repository's layout) as a known gap
        inside = not Path(reference).exists() or Path(reference).resolve().is_relative_to(repository)
    if not inside:
        raise ApiError(422, f"{field}: '{reference}' is a path; this service loads models by name (packaged, "
                       "trained into its model repository by `tessera train`, or a Hugging Face id in its cache) "
                       "and paths inside that repository only", param=field, code="model_not_allowed")
