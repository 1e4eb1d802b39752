"""A models file: its entries (``ModelAlias``, ``EMBEDDED_PROVIDER``, ``is_server_url``) and reading one, checked
(``read_models_file``, ``ModelConfigError``: a duplicated or non-string key, a bad entry named by its key). A module of
its own so that operators/llm/aliases.py keeps which files count and what a model name needs (its server, its key,
its file); aliases imports these names, so ``operators.llm.aliases.ModelAlias`` and the rest hold.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from operators.errors import TesseraError, plain_message, short_repr, unknown_name_hint
from operators.yaml_text import yaml_problem

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
    total_timeout: float | None = Field(None, gt=0, description="Seconds a call may take in all, its retries "
                                        "included; past it the call is abandoned (default: the timeout and a second "
                                        "for each attempt, one more timeout and litellm's backoffs).")
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
                             f"http://localhost:8000/v1), not {short_repr(without_password(value))}")
        # the endpoint pasted whole (from a curl line): litellm adds its route, and every call was a 404 at
        # .../chat/completions/chat/completions
        if value is not None and (end := re.search(r"/(?:chat/)?completions/*$", urlsplit(value).path)):
            parts = urlsplit(value)
            base = parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1], path=parts.path[:end.start()], query="",
                                  fragment="").geturl()  # (no user:password said)
            raise ValueError(f"must be the server's base URL, not its endpoint {end[0].rstrip('/')} (the call adds "
                             f"it): give {base}")
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


def no_model_named(model: str) -> str | None:
    """Why ``model`` names a provider and no model (``openai/``, taken before: every call asked the provider for model
    ''), or None; for an alias's entry and a step's model string alike."""
    provider, slash, name = model.partition("/")
    if not slash or not provider or name.strip("/ "):
        return None
    return f"model '{model}' names no model after its provider: give 'provider/name', such as '{provider}/<model>'"


def without_password(value: Any) -> Any:
    """``value`` as a refusal may quote it back: the ``user:password`` before an ``@`` said as ``***`` (a models file
    is the server operator's; the refusal reaches a log, a terminal, a service's 422)."""
    if not isinstance(value, str) or "@" not in value:
        return value
    scheme, sep, rest = value.partition("://") if "://" in value else ("", "", value)
    return f"{scheme}{sep}***@{rest.rsplit('@', 1)[-1]}"


def is_server_url(value: Any) -> bool:
    """Whether ``value`` is an http(s) URL naming a host (an alias's ``api_base``, ``$OLLAMA_API_BASE``)."""
    try:
        parts = urlsplit(value) if isinstance(value, str) else None
        return parts is not None and parts.scheme in ("http", "https") and bool(parts.hostname) \
            and parts.port != 0 and not any(char.isspace() for char in value)
    except ValueError:  # a port that is no number, or out of range
        return False


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
    except UnicodeDecodeError as err:  # a comment typed in Notepad's Windows-1252: what to do, too
        from operators.sources.encoding import save_as_utf8

        raise ModelConfigError(f"cannot read the models file {path}: it is not UTF-8 text (byte "
                               f"0x{err.object[err.start]:02x} at offset {err.start}); {save_as_utf8(err.object)}"
                               ) from None
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
            if (problem := no_model_named(alias.model)) is not None:
                raise ModelConfigError(f"{problem} (in {path})", field=f"{name}.model")
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
