"""Whether a model can be reached from here, found without sending it a prompt."""

from __future__ import annotations

import functools
import os
import threading
import time
from typing import TYPE_CHECKING, Callable, Mapping

from operators.errors import TesseraError
from operators.llm.aliases import OWN_SERVER, ModelAlias, is_server_url, serverless
from operators.llm.models_file import without_password

if TYPE_CHECKING:
    from operators.base import Operator

OLLAMA_DEFAULT = "http://localhost:11434"
#: Seconds a server that answered a run's check is taken to be up without being asked again: the service checks
#: each request's flow, and asked the server once per request. One that did not answer is asked again next time.
ANSWERED_FOR_S = 30.0
_answered: dict[tuple[str, str], float] = {}  # (what was asked, its URL) -> time.monotonic() of its answer
_answered_lock = threading.Lock()


class ModelUnreachableError(TesseraError):
    """A language-model step's server does not answer here (``gemma2`` with no Ollama running); nothing was run.
    This machine's state, not the spec's mistake. ``model``: the step's model as given; ``why``: what the probe
    found and what to do (``reachability``)."""

    def __init__(self, model: str, why: str, *, step: str | None = None, field: str | None = None):
        self.model, self.why = model, why
        super().__init__(f"model '{model}' cannot be reached: {why}; or give the step another model (tessera models "
                         "says which answer)", step=step, field=field)


def check_servers_answer(operators: Mapping[str, "Operator"], *, timeout: float = 1.0) -> None:
    """Raise ``ModelUnreachableError`` for the first step of ``operators`` (by step id; a step inside another too)
    that calls a language model on a server that does not answer, before any step runs: each query's call failed
    after the retrieval in front of it and its retries, the run ending with every answer degraded. A model is a
    param marked ``llm_model`` of a step that calls one (``Operator.calls_model``: not ``query.contextualize`` with
    ``method: history``). An Ollama server is asked ``GET /api/tags``; a server of one's own (``own_server``: vLLM,
    llama.cpp's, Tessera's Serve app) is asked its base URL, any HTTP answer counting; a hosted provider
    (OpenAI, DeepSeek without an api_base) is not asked. Each server once per call, within ``timeout`` seconds, and
    not again for ``ANSWERED_FOR_S`` once it answered. The URLs come from the alias files, as the calls' do (the
    service's spec guard admits aliases only): the outbound guard (``operators.outbound``), which is for the URLs a
    spec names, checks neither."""
    from operators.llm.aliases import resolve
    from operators.local_files import marked_params

    answers: dict[tuple[str, str], tuple[bool, str]] = {}
    for step, op in operators.items():
        for where, each in op.walk(f"steps.{step}"):
            names = marked_params(type(each.params), "llm_model") if each.calls_model() else []
            for name in names:
                alias = resolve(model := getattr(each.params, name))
                if alias.provider in ("ollama", "ollama_chat"):
                    key, ask = ("ollama", ollama_base(alias)), functools.partial(reachability, alias, timeout=timeout)
                elif (url := own_server(alias)) is not None:
                    key, ask = ("server", url), functools.partial(_server_listens, alias, url, timeout)
                else:
                    continue
                if key not in answers:
                    answers[key] = _asked(key, ask)
                ok, why = answers[key]
                if not ok:
                    raise ModelUnreachableError(model, why, step=step, field=f"{where}.params.{name}")


def _asked(key: tuple[str, str], ask: Callable[[], tuple[bool, str]]) -> tuple[bool, str]:
    """``ask()``, unless ``key``'s server answered within ``ANSWERED_FOR_S`` (thread-safe: the service checks its
    requests on several threads). Only an answer is remembered: a server that comes up is seen by the next check."""
    with _answered_lock:
        answered = _answered.get(key)
    if answered is not None and time.monotonic() - answered < ANSWERED_FOR_S:
        return True, f"answered {key[1]} within {ANSWERED_FOR_S:g} s"
    ok, why = ask()
    with _answered_lock:
        if ok:
            _answered[key] = time.monotonic()
        else:
            _answered.pop(key, None)
    return ok, why


def forget_answers() -> None:
    """Forget every server's answer (a test's servers come and go on ports the next test may get)."""
    with _answered_lock:
        _answered.clear()


def own_server(alias: ModelAlias) -> str | None:
    """The base URL, without credentials, of the OpenAI-compatible server of one's own ``alias``'s calls go to: its
    ``api_base``, or the ``$HOSTED_VLLM_API_BASE``/``$LM_STUDIO_API_BASE`` litellm reads for its provider; None for
    the embedded model, Ollama and a hosted provider at litellm's own address."""
    if alias.embedded or alias.provider in ("ollama", "ollama_chat"):
        return None
    url = alias.api_base or os.environ.get(OWN_SERVER.get(alias.provider, ""), "").strip()
    return _without_credentials(url) if is_server_url(url) else None


def _server_listens(alias: ModelAlias, url: str, timeout: float) -> tuple[bool, str]:
    """Whether anything answers HTTP on ``url``: a refused connection or an unknown host is down; any status (401,
    404, 500), or an answer slower than ``timeout`` on a connection it accepted, is up (the call says the rest)."""
    import requests

    where = ("change the alias's api_base in its models file" if alias.api_base
             else f"set ${OWN_SERVER[alias.provider]} to where it runs")
    try:
        requests.get(url, timeout=timeout, allow_redirects=False, stream=True).close()
    except requests.exceptions.SSLError:
        if (plain := _plain_http(url, timeout)) is not None:
            return False, _speaks_http(url, plain, where)
        return True, f"a server listens on {url}"  # (TLS with a certificate this machine does not trust)
    except requests.exceptions.ReadTimeout:
        return True, f"a server listens on {url}"
    except requests.ConnectionError as err:
        return False, f"no server answers on {url} ({type(err).__name__}); start it, or {where}"
    if (wrong := _missing_v1(alias, timeout, {})) is not None:
        return False, wrong
    return True, f"a server answers on {url}"


def _plain_http(url: str, timeout: float) -> str | None:
    """The ``http://`` form of an ``https://`` ``url`` whose TLS handshake failed, when a server answers plain HTTP
    there (the usual mistake: ``https://`` for a local llama.cpp or vLLM server), else None."""
    import requests

    if not url.startswith("https://"):
        return None
    plain = "http://" + url[len("https://"):]
    try:
        requests.get(plain, timeout=timeout, allow_redirects=False, stream=True).close()
    except requests.RequestException:
        return None
    return plain


def _speaks_http(url: str, plain: str, where: str) -> str:
    """Why an ``https://`` URL whose server speaks plain HTTP cannot be reached: its calls failed after their retries
    with litellm's "Connection error." and no cause."""
    where = where.replace("change the alias's api_base", f"change the alias's api_base to {plain}")
    return f"the server at {url} speaks http, not https (its TLS handshake fails); {where}"


def _missing_v1(alias: ModelAlias, timeout: float, headers: dict[str, str]) -> str | None:
    """Why an OpenAI-compatible ``api_base`` without its ``/v1`` cannot be used, when the server has no ``/models``
    there but has ``/v1/models`` (llama.cpp's, vLLM's): ``tessera models`` said it answers and each call failed with
    a 404. None for any other base (a proxy's own path answers its ``/models``)."""
    import requests

    base = (alias.api_base or "").rstrip("/")
    if alias.provider not in _OPENAI_COMPATIBLE or not base or base.endswith("/v1"):
        return None
    try:
        if requests.get(f"{base}/models", headers=headers, timeout=timeout).status_code != 404:
            return None
        if requests.get(f"{base}/v1/models", headers=headers, timeout=timeout).status_code >= 400:
            return None
    except requests.RequestException:
        return None
    return (f"the server answers on {_without_credentials(base)}/v1, not on {_without_credentials(base)}: an "
            f"OpenAI-compatible server's api_base ends in /v1; change the alias's api_base to "
            f"{_without_credentials(base)}/v1 in its models file")


def ollama_base(alias: ModelAlias) -> str:
    return (alias.api_base or os.environ.get("OLLAMA_API_BASE") or OLLAMA_DEFAULT).rstrip("/")


def server_of(alias: ModelAlias) -> str | None:
    """The URL ``alias``'s calls go to, without any user or password in it, for messages: its ``api_base``, an
    Ollama server's base, or the provider's default as litellm knows it (None: the embedded model, or unknown)."""
    if alias.embedded:
        return None
    if alias.provider in ("ollama", "ollama_chat"):
        url = ollama_base(alias)
    elif alias.api_base:
        url = alias.api_base
    else:
        import litellm

        try:
            url = litellm.get_llm_provider(alias.model)[3]
        except Exception:  # noqa: BLE001  (a provider litellm does not know: its call says so)
            return None
        if not url:
            return None
    return _without_credentials(url)


def _without_credentials(url: str) -> str:
    """``url`` without any ``user:password@`` (said in messages, and not sent by a check)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def _start_ollama(alias: ModelAlias) -> str:
    """Where to start Ollama, or to say where it runs: an alias's api_base wins over ``OLLAMA_API_BASE``."""
    return ("start it there, or change the alias's api_base in its models file" if alias.api_base
            else "start it (ollama serve), or set OLLAMA_API_BASE to where it runs")


def refused_hint(alias: ModelAlias) -> str:
    """What to do when ``alias``'s server refused the connection, for the call's error: a run that asked ``gemma2``
    with no Ollama running said "connection refused" and no more."""
    if alias.provider in ("ollama", "ollama_chat"):
        where = _start_ollama(alias)
        return f"no Ollama server runs there; {where}, or pick another model (tessera models says which answer)"
    if alias.api_base:
        return ("no server listens there; start it, or change the alias's api_base in its models file, or pick "
                "another model (tessera models says which answer)")
    return "pick another model (tessera models says which answer)"


#: Providers whose server is OpenAI-compatible at an ``api_base`` of one's own: its routes are under ``/v1``.
_OPENAI_COMPATIBLE = ("openai", "hosted_vllm", "lm_studio")


def not_found_hint(alias: ModelAlias) -> str | None:
    """What a 404 from ``alias``'s own OpenAI-compatible server most often means, for the call's error, or None: an
    ``api_base`` without its ``/v1`` (the server has no ``/chat/completions`` there), else a model it does not
    serve. "NotFoundError: Error code: 404" said neither."""
    if not alias.api_base or alias.provider not in _OPENAI_COMPATIBLE:
        return None
    base = alias.api_base.rstrip("/")
    if not base.endswith("/v1"):
        return (f"the server has no chat completions at {base}/chat/completions: an OpenAI-compatible server's "
                "api_base ends in /v1 (vLLM's, llama.cpp's, Tessera's own); fix it in the alias's models file")
    return (f"the server serves no model '{alias.model.split('/', 1)[1]}' (GET {base}/models lists those it does), "
            "or has no chat completions: fix the alias's model or api_base in its models file")


def reachability(alias: ModelAlias, *, timeout: float = 1.0) -> tuple[bool, str]:
    """``(reachable, why)``: the embedded model's weights and engine are installed; an Ollama server answers
    on its base URL; an API model's key variable is set (litellm knows each provider's variable), and a server
    named by ``api_base`` answers; a model of a server of one's own names its address (``serverless``)."""
    if alias.embedded:
        from operators.llm.embedded_model import ENGINE_MISSING, gguf_path, llama_cpp_installed
        from operators.models.references import ModelNotFoundError

        try:
            path = gguf_path(alias.model.split("/", 1)[1])
        except ModelNotFoundError as err:
            return False, err.message
        if not llama_cpp_installed():
            return False, ENGINE_MISSING
        return True, f"weights installed: {path.name}"
    if alias.provider in ("ollama", "ollama_chat"):
        import requests

        base = ollama_base(alias)
        if not alias.api_base and not is_server_url(base):  # "localhost:11434" was "no server answers (InvalidSchema)"
            return False, (f"$OLLAMA_API_BASE is {without_password(base)!r}, not a server's URL: give http:// or "
                           "https:// and its host (such as http://localhost:11434)")
        try:
            requests.get(f"{base}/api/tags", timeout=timeout).raise_for_status()
        except requests.RequestException as err:
            return False, f"no Ollama server answers on {base} ({type(err).__name__}); {_start_ollama(alias)}"
        return True, f"Ollama answers on {base}"
    if (why := serverless(alias)) is not None:
        return False, f"{alias.model} {why}"
    if alias.api_key_env and not os.environ.get(alias.api_key_env):
        return False, f"${alias.api_key_env} is not set"
    if not alias.api_key_env:
        from operators.llm.aliases import provider_key_unset

        if (unset := provider_key_unset(alias)) is not None:
            if not alias.api_base:
                return False, f"set {unset}"
            return False, (f"set {unset}: litellm's client sends a key even to {alias.api_base} (any value, where that "
                           "server checks none), or give the alias an api_key_env")
    if alias.api_base:
        return _server_answers(alias, timeout)
    if alias.api_key_env:
        return True, f"${alias.api_key_env} is set"
    return True, "its key is set, as litellm's check says (the provider is not asked)"


def _server_answers(alias: ModelAlias, timeout: float) -> tuple[bool, str]:
    """Ask an OpenAI-compatible server (vLLM, llama.cpp's server, Tessera's own) for ``GET /models``, with the key
    its calls would send: any answer but a refusal or a server error means it is up (a server without that route
    answers 404); no answer within ``timeout`` means it is not."""
    import requests

    url = server_of(alias)
    headers = {}
    key = os.environ.get(alias.api_key_env or ("OPENAI_API_KEY" if alias.provider == "openai" else ""), "")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        answer = requests.get(f"{alias.api_base.rstrip('/')}/models", headers=headers, timeout=timeout)
    except requests.exceptions.SSLError as err:
        if (plain := _plain_http(url, timeout)) is not None:
            return False, _speaks_http(url, plain, "change the alias's api_base in its models file")
        return False, f"the TLS handshake with {url} failed ({type(err).__name__})"
    except requests.ConnectionError as err:  # as the run's check says it: what to do, not only what failed
        return False, (f"no server answers on {url} ({type(err).__name__}); start it, or change the alias's api_base "
                       "in its models file")
    except requests.RequestException as err:
        return False, f"no server answers on {url} ({type(err).__name__})"
    if answer.status_code == 404 and (wrong := _missing_v1(alias, timeout, headers)) is not None:
        return False, wrong
    if answer.status_code in (401, 403):
        which = "the key" if key else "a call without a key"
        return False, f"the server at {url} refuses {which} (HTTP {answer.status_code})"
    if answer.status_code >= 500:
        return False, f"the server at {url} answers HTTP {answer.status_code}"
    return True, f"a server answers on {url}" + _unlisted(alias, answer)


def _unlisted(alias: ModelAlias, answer) -> str:
    """What to check when the server's ``/models`` list does not hold the alias's model (vLLM refuses a call for it
    with a 404; llama.cpp's server answers any name): ``tessera models`` said only that the server answers."""
    name = alias.model.split("/", 1)[1] if "/" in alias.model else alias.model
    try:
        listed = [str(each["id"]) for each in answer.json()["data"]]
    except (ValueError, KeyError, TypeError):  # no OpenAI list: nothing to compare with
        return ""
    if not listed or name in listed:
        return ""
    shown = ", ".join(listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")
    return (f"; it lists {shown}, not '{name}' (a server that serves only the models it lists, as vLLM, refuses the "
            "calls: fix the alias's model in its models file)")
