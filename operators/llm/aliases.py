"""Model aliases: the short names flows use (``local``, ``gemma2``, ``DeepSeekv3``) and what they mean.

The package ships ``models.yaml``; a user file with the same layout overrides it entry by
entry: the file named by ``$TESSERA_MODELS``, else ``$TESSERA_HOME/models.yaml`` when it
exists. A model name that is no alias is passed to litellm as it is
(``openai/gpt-4o-mini``, ``ollama_chat/phi3``), so any litellm model works without an entry.
Keys never live here: an entry names the environment variable that holds its key.
"""

from __future__ import annotations

import functools
import json
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from operators.errors import TesseraError, close_names, plain_message, short_repr, unknown_name_hint
from operators.home import tessera_home
from operators.yaml_text import yaml_problem

PACKAGED_FILE = Path(__file__).with_name("models.yaml")
#: The provider prefix of the embedded model (a litellm custom provider, ``operators.llm.embedded``).
EMBEDDED_PROVIDER = "tessera"


class ModelConfigError(TesseraError):
    """A models.yaml that cannot be read or has a bad entry."""


class ModelAlias(BaseModel):
    """One entry of models.yaml: a litellm model string and how to reach it."""

    model_config = ConfigDict(extra="forbid", frozen=True)  # shared by every caller of a cached file

    model: str = Field(..., min_length=1, description="litellm model string, 'provider/name'.")
    description: str = Field("", description="One line for `tessera models`.")
    api_base: str | None = Field(None, description="Server URL, when not the provider's default.")
    api_key_env: str | None = Field(None, description="Environment variable holding the API key.")
    timeout: float | None = Field(None, gt=0, description="Seconds per attempt (litellm's timeout).")
    num_retries: int | None = Field(None, ge=0, description="litellm's retries after a transient error.")
    rpm: int | None = Field(None, gt=0, description="Requests per minute (litellm Router's limit).")
    tpm: int | None = Field(None, gt=0, description="Tokens per minute (litellm Router's limit).")
    max_parallel_requests: int | None = Field(None, gt=0, description="Requests in flight at once.")
    model_source: str | None = Field(None, description="What vLLM loads for this model on GPUs (a Hugging Face "
                                     "id or a local path): a row-wise LLM step given GPUs on the Ray executor runs "
                                     "it through ray.data.llm; without one, GPU steps use the gateway too.")

    @field_validator("api_base", mode="before")
    @classmethod
    def _server_url(cls, value: Any) -> Any:
        """An ``api_base`` that is no http(s) URL naming a host (``localhost:8000``, ``5``) passed until a call
        failed obscurely ("no server answers on localhost:8000 (InvalidSchema)"): refused as the file is read."""
        if value is not None and not is_server_url(value):
            raise ValueError(f"must be a server's URL, http:// or https:// and its host (such as "
                             f"http://localhost:8000/v1), not {short_repr(value)}")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _variable_name(cls, value: str | None) -> str | None:
        """An ``api_key_env`` that names no variable (the key itself pasted there: ``sk-...``) was taken as one: the
        run's check then printed it as "$sk-... is not set", the service's 422 answered it to its client. Refused
        without its value, which may be a key."""
        if value is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):
            raise ValueError("must be the name of the environment variable that holds the key (letters, digits and _, "
                             "such as DEEPSEEK_API_KEY), not the key: export the key in that variable; a key is never "
                             "written in a models file")
        return value

    @property
    def provider(self) -> str:
        return self.model.split("/", 1)[0] if "/" in self.model else ""

    @property
    def embedded(self) -> bool:
        return self.provider == EMBEDDED_PROVIDER


def is_server_url(value: Any) -> bool:
    """Whether ``value`` is an http(s) URL naming a host (an alias's ``api_base``, ``$OLLAMA_API_BASE``)."""
    try:
        parts = urlsplit(value) if isinstance(value, str) else None
        return parts is not None and parts.scheme in ("http", "https") and bool(parts.hostname) \
            and parts.port != 0 and not any(char.isspace() for char in value)
    except ValueError:  # a port that is no number, or out of range
        return False


def user_file() -> Path | None:
    """The user's models file: ``$TESSERA_MODELS`` (a blank one counts as unset, as an empty one does), else
    ``$TESSERA_HOME/models.yaml`` if anything is there (a folder there is an error, not a file to skip)."""
    named = os.environ.get("TESSERA_MODELS", "").strip()
    if named:
        return Path(named).expanduser()
    default = tessera_home() / "models.yaml"
    return default if default.exists() else None


def read_models_file(path: Path) -> dict[str, ModelAlias]:
    """The aliases of one models file, checked as a run reads them (``ModelConfigError``; ``tessera serve`` asks
    before Serve starts, so a replica does not find it out), parsed once per version of it (a service request asks for
    them once per model a step names: 85 % of preparing a search was reading these files again). A copy: callers
    update it."""
    try:
        stat = path.stat()
    except OSError as err:
        raise ModelConfigError(f"cannot read the models file {path}: {err}") from None
    return dict(_parse(str(path), stat.st_mtime_ns, stat.st_size, stat.st_ino))


class _BadKey(Exception):
    """A key of a models file that PyYAML would take without a word: said with the file's name by ``_parse``."""


class _KeyCheckingLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a duplicated key (it keeps the last silently) and a key that is not a string
    (``1`` and ``true`` both became the alias "1"... and ``3.10`` became "3.1")."""


def _checked_mapping(loader: _KeyCheckingLoader, node: yaml.MappingNode) -> dict:
    seen: dict[str, int] = {}
    for key_node, _ in node.value:
        line = key_node.start_mark.line + 1
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        if not isinstance(key_node, yaml.ScalarNode):
            raise _BadKey(f"has a list or mapping as a key (line {line}): keys are names")
        if key_node.tag != "tag:yaml.org,2002:str" and not key_node.value:
            raise _BadKey(f"has an empty key (line {line}): give it a name")
        if key_node.tag != "tag:yaml.org,2002:str":
            raise _BadKey(f"has the key {key_node.value} (line {line}), which YAML reads as a number, a boolean or "
                          f"null, not a name: quote it (\"{key_node.value}\": ...)")
        if key_node.value in seen:
            raise _BadKey(f"gives the key '{key_node.value}' twice (lines {seen[key_node.value]} and {line}), "
                          "and YAML would keep only the last: remove one")
        seen[key_node.value] = line
    return loader.construct_mapping(node)


_KeyCheckingLoader.add_constructor("tag:yaml.org,2002:map", _checked_mapping)


def _gguf_beside(model: str, folder: Path) -> str:
    """``tessera/<path>.gguf`` with a relative path read from the models file's folder, not the working directory
    (what a file of settings means by a relative path); an absolute or ``~`` path is kept as it is."""
    name = model.split("/", 1)[1]
    if not name.endswith(".gguf") or name.startswith("~") or Path(name).is_absolute():
        return model
    return f"{EMBEDDED_PROVIDER}/{folder / name}"


@functools.lru_cache(maxsize=32)
def _parse(file: str, mtime_ns: int, size: int, inode: int) -> dict[str, ModelAlias]:
    path = Path(file)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_KeyCheckingLoader) or {}
    except UnicodeDecodeError as err:
        raise ModelConfigError(f"cannot read the models file {path}: it is not UTF-8 text (byte "
                               f"0x{err.object[err.start]:02x} at offset {err.start})") from None
    except OSError as err:
        raise ModelConfigError(f"cannot read the models file {path}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise ModelConfigError(f"the models file {path} is not valid YAML: {yaml_problem(err)}") from None
    except _BadKey as err:
        raise ModelConfigError(f"the models file {path} {err}") from None
    if not isinstance(data, dict):
        raise ModelConfigError(f"the models file {path} must map alias names to entries")
    wrapped = data.get("models")
    if len(data) == 1 and isinstance(wrapped, dict) and wrapped and "model" not in wrapped \
            and all(isinstance(entry, (dict, str)) for entry in wrapped.values()):
        # `models: {mine: {...}}` said "unknown key 'mine'" of an alias named models
        raise ModelConfigError(f"the models file {path} maps alias names at its top level, without a `models:` "
                               f"key above them: remove that level (its entries: {', '.join(map(str, wrapped))})",
                               field="models")
    out = {}
    for name, entry in data.items():
        if not name.strip():
            raise ModelConfigError(f"the models file {path} has an empty alias name ({name!r}): give it a name")
        if isinstance(entry, str):
            entry = {"model": entry}
        elif not isinstance(entry, dict):  # pydantic said "a valid dictionary or instance of ModelAlias"
            given = "empty" if entry is None else json.dumps(entry, default=str)
            raise ModelConfigError(f"the alias '{name}' in {path} is {given}: give a litellm model string "
                                   "('provider/name') or a mapping with a `model`", field=name)
        try:
            alias = ModelAlias.model_validate(entry)
            out[name] = alias.model_copy(update={"model": _gguf_beside(alias.model, path.parent.absolute())}) \
                if alias.embedded else alias
        except ValidationError as err:
            raise _entry_error(err, name, path) from None
    return out


def _entry_error(err: ValidationError, name: str, path: Path) -> ModelConfigError:
    """A bad entry's first problem, an unknown key first: ``mine: {modle: openai/x}`` was "field 'mine.model': Field
    required", which never named ``modle``."""
    errors = err.errors()
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    where = ".".join([str(name), *map(str, first["loc"])])
    if first["type"] != "extra_forbidden" or len(first["loc"]) != 1:
        return ModelConfigError(f"{plain_message(first)} (in {path})", field=where)
    key = str(first["loc"][0])
    hint = unknown_name_hint(key, ModelAlias.model_fields, "keys")
    return ModelConfigError(f"unknown key '{key}' (in {path}){hint}", field=where)


def aliases() -> dict[str, ModelAlias]:
    """Every alias: the packaged ones, then the user's file over them."""
    found = read_models_file(PACKAGED_FILE)
    user = user_file()
    if user is not None:
        if not user.is_file():
            named = "$TESSERA_MODELS names" if os.environ.get("TESSERA_MODELS", "").strip() else \
                "$TESSERA_HOME/models.yaml is"
            raise ModelConfigError(f"{named} {user}, which is not a file")
        found.update(read_models_file(user))
    return found


def alias_sources() -> dict[str, str]:
    """Which file each alias comes from (for ``tessera models``)."""
    sources = {name: "packaged" for name in read_models_file(PACKAGED_FILE)}
    user = user_file()
    if user is not None and user.is_file():
        sources.update({name: str(user) for name in read_models_file(user)})
    return sources


def unknown_model(model: str, *, servers: bool = True) -> str | None:
    """Why ``model`` names no model (neither an alias nor a litellm model string whose provider litellm knows, such
    as a misspelt alias), or None. litellm is imported only for a name that is no alias. ``servers``: a model of a
    server of one's own named without its address is no model either (``no_server``; a spec's validation leaves it
    to the pre-run check, after the service's guard has said which models a request may name)."""
    found = aliases()
    embedded = found[model].model if model in found and found[model].embedded else model
    if embedded.startswith(EMBEDDED_PROVIDER + "/"):
        return _embedded_problem(model, embedded.split("/", 1)[1])
    if servers and (problem := no_server(model)) is not None:
        return problem
    if model in found:
        return None
    import litellm

    litellm.suppress_debug_info = True  # its "Provider List" line on stdout
    try:
        litellm.get_llm_provider(model)
        return None
    except Exception:  # noqa: BLE001  (litellm raises its BadRequestError, or others for odd names)
        close = close_names(model, found)
        return (f"unknown model '{model}': neither a language model's alias ({', '.join(found)}; `tessera models` "
                "lists them) nor a litellm model string whose provider litellm knows ('provider/name', such as "
                "'ollama_chat/gemma2')"
                + (f"; did you mean '{close[0]}'?" if close else ""))


#: Providers of a server of one's own, which litellm has no address for: the variable it reads instead.
OWN_SERVER = {"hosted_vllm": "HOSTED_VLLM_API_BASE", "lm_studio": "LM_STUDIO_API_BASE"}


def no_server(model: str) -> str | None:
    """Why ``model`` reaches no server (``hosted_vllm/foo`` with no api_base: every call failed after its retries
    with "Name or service not known", naming no server), or None."""
    alias = resolve(model)
    if (why := serverless(alias)) is None:
        return None
    return f"model '{model}'" + (f" ({alias.model})" if alias.model != model else "") + f" {why}"


def serverless(alias: ModelAlias) -> str | None:
    """What follows a model's name when ``alias`` reaches no server ("names no server: ..."), or None: one rule for
    a run's check (``no_server``) and ``tessera models`` (``reachability``), which said "reachable" of it."""
    variable = OWN_SERVER.get(alias.provider)
    if variable is None or alias.api_base or os.environ.get(variable):
        return None
    return (f"names no server: litellm has no address for {alias.provider}; give it an alias with api_base "
            f"in models.yaml (docs/llm.md, Model aliases), or set ${variable}")


def _embedded_problem(model: str, name: str) -> str | None:
    """Why ``name`` names no embedded model (a misspelt packaged name: ``smollm3``), or None. Read from the name
    alone: whether a .gguf file is there is the pre-run model check's (``missing_file``), so that a
    request to the service cannot learn which files exist on it from a spec's validation."""
    from operators.llm.embedded_model import PACKAGED, gguf_path
    from operators.models.references import ModelNotFoundError

    if name in PACKAGED or name.endswith(".gguf"):
        return None
    try:
        gguf_path(name)  # (raises for any other name, without looking at files)
    except ModelNotFoundError as err:
        return f"model '{model}': {err.message}"
    return None


def missing_file(model: str) -> str | None:
    """The absolute path of the .gguf file ``model`` (an alias or ``tessera/<path>.gguf``) names when no file is
    there, else None: what an LLM step declares (``LLMStep.required_models``), so a flow is refused before it runs."""
    alias = resolve(model)
    name = alias.model.split("/", 1)[1] if alias.embedded else ""
    if not name.endswith(".gguf") or (path := Path(name).expanduser()).is_file():
        return None
    return str(path.absolute())


def resolve(model: str) -> ModelAlias:
    """The alias entry for ``model``, or an entry that passes ``model`` to litellm unchanged."""
    found = aliases()
    if model in found:
        return found[model]
    return ModelAlias(model=model)


def key_env(model: str) -> str | None:
    """The environment variable that holds ``model``'s key, or None when it needs none (or, without an alias's
    ``api_key_env``, when litellm finds its key set). What an
    LLM step declares (``Operator.required_env``), so an unset key is refused before the steps in front of it run.

    An alias's ``api_key_env`` when it names one. Otherwise the provider's key as litellm's own
    ``validate_environment`` names it (``openai/gpt-4o-mini``: ``OPENAI_API_KEY``), reported only while unset:
    litellm knows each provider's variable and we keep no table of our own. That holds for a server an alias names
    by ``api_base`` too, as ``tessera models`` says: an ``openai/`` model there needs ``OPENAI_API_KEY`` (litellm's
    OpenAI client will not call without a key), a ``hosted_vllm/`` one needs none. Nothing for the embedded model,
    and litellm's non-key settings (``OLLAMA_API_BASE`` has a default) are not asked for."""
    alias = resolve(model)
    if alias.api_key_env or alias.embedded:
        return alias.api_key_env or None
    return provider_key_unset(alias)


def provider_key_unset(alias: ModelAlias) -> str | None:
    """The key variable litellm says ``alias``'s provider needs and that is unset, or None. An alias whose provider
    litellm does not know is refused here (its every call fails), as a model string naming one is when a step is
    made: litellm's key check would pass it, and print its "Provider List" banner on stdout."""
    import litellm

    litellm.suppress_debug_info = True  # its "Provider List" line on stdout
    try:
        litellm.get_llm_provider(alias.model, api_base=alias.api_base)
    except Exception:  # noqa: BLE001  (litellm raises its BadRequestError, or others for odd names)
        names = [name for name, entry in aliases().items() if entry == alias]
        where = f"alias '{names[0]}' in {alias_sources().get(names[0], 'packaged')}" if names else "model"
        raise ModelConfigError(f"the {where} names '{alias.model}', whose provider litellm does not know: give "
                               "a litellm model string, 'provider/name' (such as 'ollama_chat/gemma2')") from None
    try:
        missing = litellm.validate_environment(alias.model, api_base=alias.api_base).get("missing_keys") or []
    except Exception:  # noqa: BLE001  (a provider litellm cannot check: its call will say what is wrong)
        return None
    keys = [name for name in missing if name.endswith(("_KEY", "_TOKEN"))]
    return keys[0] if keys else None


def known_model(model: str) -> str:
    """A pydantic validator: ``model`` if it names a model, else the error that says why (``unknown_model``), so
    a misspelt alias is refused when the flow is built, not after the retrieval before its step."""
    from pydantic_core import PydanticCustomError

    if (problem := unknown_model(model, servers=False)) is not None:
        raise PydanticCustomError("unknown_model", problem)
    return model


def model_identity(model: str) -> dict:
    """What ``model`` names now (its alias entry, or the litellm string), for a step's cache key: another model
    behind the same alias is another cache entry. An embedded model adds its .gguf file's content hash: a file
    re-quantised or retrained at the same path is another model (its name alone kept replaying the old answers)."""
    alias = resolve(model)
    identity = alias.model_dump(exclude={"description"}, exclude_none=True)
    if alias.embedded:
        from operators.llm.embedded_model import gguf_path
        from operators.models.fingerprint import file_digest
        from operators.models.references import ModelNotFoundError

        try:
            identity["weights"] = file_digest(gguf_path(alias.model.split("/", 1)[1]))
        except (ModelNotFoundError, OSError):
            pass  # no file to read: the run's model check names it
    return identity
