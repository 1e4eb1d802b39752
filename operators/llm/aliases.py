"""Model aliases: the short names flows use (``local``, ``gemma2``, ``DeepSeekv3``) and what they mean.

The package ships ``models.yaml``; a user file with the same layout overrides it entry by
entry: the file named by ``$TESSERA_MODELS``, else ``$TESSERA_HOME/models.yaml`` when it
exists. A model name that is no alias is passed to litellm as it is
(``openai/gpt-4o-mini``, ``ollama_chat/phi3``), so any litellm model works without an entry.
Keys never live here: an entry names the environment variable that holds its key. An entry
(``ModelAlias``) and the reading of one file are operators/llm/models_file.py's, imported here.
"""

from __future__ import annotations

import os
from pathlib import Path

from operators.errors import close_names, see_docs
from operators.home import tessera_home
from operators.llm.models_file import EMBEDDED_PROVIDER, ModelAlias, ModelConfigError, no_model_named, read_models_file
from operators.llm.models_file import is_server_url  # noqa: F401 (re-exported)

PACKAGED_FILE = Path(__file__).with_name("models.yaml")


def user_file() -> Path | None:
    """The user's models file: ``$TESSERA_MODELS`` (a blank one counts as unset, as an empty one does), else
    ``$TESSERA_HOME/models.yaml`` if anything is there (a folder there is an error, not a file to skip)."""
    named = os.environ.get("TESSERA_MODELS", "").strip()
    if named:
        return Path(named).expanduser()
    default = tessera_home() / "models.yaml"
    return default if default.exists() else None


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
    if model not in found and (problem := no_model_named(model)) is not None:  # (litellm takes it)
        return f"{problem}, or an alias ({', '.join(found)})"
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
            f"in models.yaml, or set ${variable}; see {see_docs('llm', 'Model aliases')}")


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
    return keys[0] if keys else empty_provider_key(alias)


#: Providers that need no key (a server of one's own, Ollama): an empty ``<PROVIDER>_API_KEY`` asks for nothing.
_KEYLESS = frozenset({"ollama", "ollama_chat", *OWN_SERVER})


def provider_key_variable(alias: ModelAlias) -> str | None:
    """The variable that holds a provider's key as litellm names it, ``<PROVIDER>_API_KEY`` (``OPENAI_API_KEY``,
    ``DEEPSEEK_API_KEY``), for a model that is not the embedded one."""
    return f"{alias.provider.upper()}_API_KEY" if alias.provider and not alias.embedded else None


def empty_provider_key(alias: ModelAlias) -> str | None:
    """``<PROVIDER>_API_KEY`` when it is set but empty (``export OPENAI_API_KEY=``), for a provider that needs a key:
    litellm's check counts it as set (it asks whether the name is there), the run went on, and every call failed
    after the retrieval with "Missing credentials", where an alias's empty ``api_key_env`` refused the run."""
    variable = provider_key_variable(alias)
    if variable is None or alias.provider in _KEYLESS or (alias.api_base and alias.provider != "openai"):
        return None  # (an openai/ model needs a key on any api_base: litellm's OpenAI client will not call without)
    return variable if os.environ.get(variable) == "" else None


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
    identity = alias.model_dump(exclude={"description", "total_timeout"}, exclude_none=True)  # (not the reply's)
    if alias.embedded:
        from operators.llm.embedded_model import gguf_path
        from operators.models.fingerprint import file_digest
        from operators.models.references import ModelNotFoundError

        try:
            identity["weights"] = file_digest(gguf_path(alias.model.split("/", 1)[1]))
        except (ModelNotFoundError, OSError):
            pass  # no file to read: the run's model check names it
    return identity
