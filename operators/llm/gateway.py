"""The one way Tessera calls a language model: ``complete`` and ``complete_many``, through litellm.

A model name is an alias (``operators.llm.aliases``) or any litellm model string. Each
resolved model gets one litellm ``Router`` per process (held in the shared
``ObjectRepository``), so timeouts, retries with backoff, and the rate limits an alias
sets (``rpm``, ``tpm``) are litellm's own, not a loop of ours; its ``max_parallel_requests``,
which litellm keeps for async calls only, is held here, per process (``_slot``). A call to a server is litellm's
async call, abandoned past its ``total_timeout`` (``operators.llm.whole_call``).
Keys come from the environment only: an alias names its variable (``api_key_env``),
and litellm reads the providers' usual variables itself. What a failed call was (``LLMError.kind``) and what
its message says are ``operators.llm.failures``.

Usage::

    from operators.llm import complete
    done = complete("Say hello.", model="local", max_tokens=16)
    done.text, done.prompt_tokens, done.completion_tokens, done.seconds
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import threading
import time
import warnings
from typing import Any, Callable, Iterator, Sequence

from pydantic import BaseModel, Field

from operators.call_memo import call_id, current_memo
from operators.errors import FlowCancelled, TesseraError
from operators.interrupt import checkpoint, each_concurrently
from operators.llm.aliases import ModelAlias, key_env, missing_file, provider_key_variable, resolve, unknown_model
from operators.llm.failures import ErrorKind, UnusableStream, failure_detail, failure_kind
from operators.llm.loading import loaded_once
from operators.llm.whole_call import CallOverran, default_limit, result_within, stream_within, warm
from operators.redact import redact, remember_secret

#: A prompt: one user message as text, or chat messages (``[{"role": ..., "content": ...}]``).
Prompt = str | Sequence[dict[str, Any]]
DEFAULT_TIMEOUT = 60.0
DEFAULT_RETRIES = 2


class Completion(BaseModel):
    """One model call's answer and what it cost."""

    text: str = Field(description="The model's reply (the first choice's message content).")
    model: str = Field(description="The model asked for (an alias or a litellm model string).")
    prompt_tokens: int = Field(0, description="Tokens of the prompt, as the provider counted them.")
    completion_tokens: int = Field(0, description="Tokens of the reply.")
    seconds: float = Field(0.0, description="Wall-clock seconds of the call, retries included.")
    finish_reason: str | None = Field(None, description="'stop', 'length' (max_tokens reached), ...")
    replayed: bool = Field(False, description="Read back, not sent: a call an interrupted run of the step had "
                           "finished (``operators.call_memo``); its tokens and seconds were spent then.")


class LLMError(TesseraError):
    """A model call that failed after litellm's retries; ``kind`` says how."""

    def __init__(self, message: str, *, kind: ErrorKind = "api", seconds: float = 0.0, **where: Any) -> None:
        self.kind = kind
        self.seconds = seconds  # what the failed call took, its retries included (0: it was never sent)
        super().__init__(redact(message), **where)  # a server may echo the key back in its error body


def messages_of(prompt: Prompt, system: str | None = None) -> list[dict[str, Any]]:
    """Chat messages for ``prompt``, with ``system`` first when given."""
    body = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]
    return ([{"role": "system", "content": system}] if system else []) + body


def _router(alias: ModelAlias) -> Any:
    """litellm's Router for one resolved model (built once per process)."""
    def build() -> Any:
        import litellm
        from litellm import Router

        litellm.suppress_debug_info = True  # no "Give Feedback / Get Help" banner on stdout after an error
        litellm.disable_aiohttp_transport = True  # async calls (``whole_call``) on httpx, as sync ones are: aiohttp
        # refused a URL with credentials in it, and said its failures in other words
        logging.getLogger("LiteLLM Router").addFilter(_no_fallback_log)  # (once: a filter is added once)

        if alias.embedded:
            from operators.llm.embedded import register

            register()
        else:
            warm()  # (the async calls' imports: not a first call's total_timeout)
        params: dict[str, Any] = {"model": alias.model}
        if alias.api_base:
            params["api_base"] = alias.api_base
        for limit in ("rpm", "tpm"):
            if getattr(alias, limit) is not None:
                params[limit] = getattr(alias, limit)
        # the alias's max_parallel_requests is ``_slot``'s: litellm's own (on async calls, else derived from rpm, tpm)
        # refused a call past it with a 429 rather than wait (16 threads on `rpm: 4` lost 12 calls), and still counted
        # a call abandoned at its total_timeout as in flight when the next one came
        params["max_parallel_requests"] = sys.maxsize
        return Router(model_list=[{"model_name": "m", "litellm_params": params}], disable_cooldowns=True,
                      num_retries=alias.num_retries if alias.num_retries is not None else DEFAULT_RETRIES,
                      timeout=alias.timeout or DEFAULT_TIMEOUT)

    return loaded_once("litellm_router", alias.model_dump(exclude={"description"}), build)


def _no_fallback_log(record: logging.LogRecord) -> bool:
    """Drop litellm's Router's "Fallback also failed: ... No fallback was attempted" (an ERROR of three lines on
    stderr, from its own handler) for a stream that broke: no Tessera call has a fallback, and the failure is the
    call's ``LLMError``, said once in words (a degraded query's reason, ``tessera chat``'s "no answer")."""
    return not str(record.msg).startswith("Fallback also failed")


def complete(prompt: Prompt, *, model: str = "local", system: str | None = None, temperature: float = 0.0,
             max_tokens: int = 256, timeout: float | None = None, num_retries: int | None = None,
             on_text: Callable[[str], None] | None = None, total_timeout: float | None = None,
             **params: Any) -> Completion:
    """One model call; raises ``LLMError`` when it fails (``FlowCancelled`` when the flow was cancelled).

    With ``on_text`` the reply is streamed: ``on_text`` gets each piece of text as the model writes it, and the
    ``Completion`` is the whole reply as without it (litellm rebuilds it and its usage from the chunks). A
    stream that fails after its first piece is not retried (the pieces are out); it raises ``LLMError``.
    ``params`` go to litellm as they are (``stop``, ``seed``, ``top_p``, ``response_format``...).
    ``total_timeout`` bounds the whole call, its retries included (``timeout`` bounds each wait for the server's next
    bytes): past it the call is abandoned, a ``timeout`` ``LLMError`` that names it (default: ``total_limit``).
    """
    if (problem := unknown_model(model)) is not None:  # litellm would raise its own BadRequestError
        raise LLMError(problem, kind="not_found")
    alias = resolve(model)
    if alias.embedded and (missing := missing_file(model)) is not None:
        raise LLMError(f"{named(model, alias)}: GGUF file {missing} does not exist", kind="not_found")
    kwargs: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens, **params}
    if timeout is not None:
        kwargs["timeout"] = timeout
    if num_retries is not None:
        kwargs["num_retries"] = num_retries
    variable = key_env(model)
    if variable is not None and not os.environ.get(variable):  # litellm would retry it, then fail as "api"
        raise LLMError(f"{named(model, alias)} needs its key in ${variable}, which is not set", kind="auth")
    if alias.api_key_env:
        kwargs["api_key"] = os.environ[alias.api_key_env]
    _remember_keys(alias, kwargs.get("api_key"))
    router = _router(alias)  # outside the try: a broken setup is a bug to raise, not a model failure
    if alias.embedded:
        from operators.llm.embedded_model import preload

        preload(alias.model)
    checkpoint()  # a cancel while the model loaded
    _quiet_litellm_warnings()
    messages = messages_of(prompt, system)
    limit = total_limit(alias, timeout, num_retries, total_timeout)
    deadline = None if alias.embedded else time.monotonic() + limit  # (the embedded model's timeout is per call)
    with _slot(alias):  # the alias's max_parallel_requests, for the whole process
        started = time.perf_counter()
        try:
            if on_text is None and deadline is None:
                response = router.completion(model="m", messages=messages, **kwargs)
            elif on_text is None:
                response = result_within(lambda: router.acompletion(model="m", messages=messages, **kwargs), deadline)
            else:
                response = _streamed(router, messages, {**kwargs, **_usage_option(alias)}, on_text, deadline)
        except FlowCancelled:
            raise
        except CallOverran:
            raise LLMError(f"{named(model, alias)}: the call went on past its total_timeout of {limit:g} s without "
                           "finishing (the server kept it going), so it was abandoned; to wait longer, raise "
                           "total_timeout (the step's param, or the alias's in models.yaml)", kind="timeout",
                           seconds=time.perf_counter() - started) from None
        except Exception as err:  # noqa: BLE001  litellm's exceptions, mapped to one kind
            checkpoint()  # a cancel that stopped the embedded model arrives wrapped: raise it as itself
            kind = failure_kind(err)
            # the timeout bounds each wait for the server's next bytes, not the call: "no reply within 3 s" was said
            # of a call a server had kept going for a minute, a byte now and then
            detail = (f"the server sent nothing for {kwargs.get('timeout') or alias.timeout or DEFAULT_TIMEOUT:g} s "
                      "(the timeout)" if kind == "timeout" and not alias.embedded else failure_detail(err))
            if detail == "connection refused":  # say what to do: most often a local server not started
                from operators.llm.reachable import refused_hint

                detail += f": {refused_hint(alias)}"
            elif kind == "not_found":  # an api_base without its /v1, or a model the server does not serve
                from operators.llm.reachable import not_found_hint

                detail += f": {hint}" if (hint := not_found_hint(alias)) else ""
            raise LLMError(f"{named(model, alias)}: {detail}", kind=kind,
                           seconds=time.perf_counter() - started) from err
    seconds = time.perf_counter() - started
    choice = response.choices[0] if response.choices else None
    if choice is None:  # HTTP 200 with `choices: []`: nothing to read, not an empty answer
        raise LLMError(f"{named(model, alias)}: the server's reply has no choices", kind="api", seconds=seconds)
    usage = getattr(response, "usage", None)
    done = Completion(
        text=choice.message.content or "", model=model,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        seconds=seconds, finish_reason=getattr(choice, "finish_reason", None))
    if (problem := _unusable(done, messages, max_tokens)) is not None:
        raise LLMError(f"{named(model, alias)}: {problem}", kind="api", seconds=seconds)
    return done


def _quiet_litellm_warnings() -> None:
    """Drop pydantic's "Pydantic serializer warnings" that litellm raises while it writes up a reply that is not in
    OpenAI's shape (``content`` a list): three lines on stderr per query, before the error that says it in words.
    (Set again on each call: a filter set once per process is lost to any ``catch_warnings`` that ends after it.)"""
    warnings.filterwarnings("ignore", message="Pydantic serializer warnings", category=UserWarning,
                            module=r"pydantic\.main")


def _remember_keys(alias: ModelAlias, key: str | None) -> None:
    """Mask the call's key in every error message and log line from now on (``operators.redact``): the alias's own,
    else the provider's variable that litellm reads itself (``OPENAI_API_KEY``, ``DEEPSEEK_API_KEY``: litellm names
    them ``<PROVIDER>_API_KEY``), since a server (a proxy, a self-hosted one) may quote the key in its error."""
    if key is None and (variable := provider_key_variable(alias)) is not None:
        key = os.environ.get(variable)
    remember_secret(key)


#: Each resolved model's slots (its ``max_parallel_requests``), one semaphore per process, made on first use.
_SLOTS: dict[str, threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()


@contextlib.contextmanager
def _slot(alias: ModelAlias) -> Iterator[None]:
    """Hold one of the alias's ``max_parallel_requests`` slots, shared by every call of this process (litellm's
    Router keeps them for async calls only); a cancel while waiting for one raises ``FlowCancelled``."""
    if alias.max_parallel_requests is None:
        yield
        return
    key = json.dumps(alias.model_dump(exclude={"description"}), sort_keys=True, default=str)  # the Router's
    with _SLOTS_LOCK:
        slots = _SLOTS.setdefault(key, threading.BoundedSemaphore(alias.max_parallel_requests))
    while not slots.acquire(timeout=0.05):
        checkpoint()
    try:
        yield
    finally:
        slots.release()


#: The most characters one token of a reply may stand for: a longer reply is not what max_tokens asked for.
CHARS_PER_TOKEN = 64


def _unusable(done: Completion, messages: list[dict[str, Any]], max_tokens: int) -> str | None:
    """Why a well-formed reply is still not the model's answer: far longer than ``max_tokens`` allows (a server that
    ignores it, 1 MB of text), the prompt's last message sent back (a server that echoes), or stopped by the
    provider's content filter (finish reason ``content_filter``: what came is a part, or nothing); None when it is."""
    if done.finish_reason == "content_filter":
        return "the provider's content filter stopped the reply (finish reason content_filter), so it is not an answer"
    last = messages[-1].get("content") if messages else None
    asked = " ".join(last.split()).casefold() if isinstance(last, str) else ""
    if len(asked.split()) >= 8 and asked in " ".join(done.text.split()).casefold():
        return "the model sent the prompt back (an echo), not an answer"
    if len(done.text) > max_tokens * CHARS_PER_TOKEN:
        return f"the reply is {len(done.text):,} characters, more than max_tokens={max_tokens} allows"
    return None


def total_limit(alias: ModelAlias, timeout: float | None, num_retries: int | None,
                total_timeout: float | None) -> float:
    """Seconds a call may take in all: the call's ``total_timeout``, else its alias's, else what its timeout and
    retries, with litellm's backoffs, allow (``whole_call.default_limit``: about 249 s for 60 s and 2 retries)."""
    if total_timeout or alias.total_timeout:
        return float(total_timeout or alias.total_timeout)  # type: ignore[arg-type]
    retries = num_retries if num_retries is not None else \
        alias.num_retries if alias.num_retries is not None else DEFAULT_RETRIES
    return default_limit(timeout or alias.timeout or DEFAULT_TIMEOUT, retries)


def _streamed(router: Any, messages: list[dict[str, Any]], kwargs: dict[str, Any],
              on_text: Callable[[str], None], deadline: float | None) -> Any:
    """The streamed call: each chunk's text to ``on_text``, then the whole response rebuilt from the chunks; with a
    ``deadline`` (``time.monotonic()``), litellm's async stream, abandoned past it."""
    import litellm

    if deadline is None:
        stream = router.completion(model="m", messages=messages, stream=True, **kwargs)
        pieces: Iterator[Any] = iter(stream)
    else:
        pieces = stream_within(lambda: router.acompletion(model="m", messages=messages, stream=True, **kwargs),
                               deadline)
        stream = next(pieces)
    chunks, written, most = [], 0, kwargs["max_tokens"] * CHARS_PER_TOKEN
    try:
        for chunk in pieces:
            checkpoint()  # a cancelled flow (its client went away) stops reading: closing the stream ends the answer
            chunks.append(chunk)
            text = chunk.choices[0].delta.content if chunk.choices else None
            if text:
                written += len(text)
                if written > most:  # a server that ignores max_tokens: stop reading, not a megabyte later
                    raise UnusableStream(f"the reply passed {most:,} characters, more than max_tokens="
                                          f"{kwargs['max_tokens']} allows")
                on_text(text)
    finally:
        if deadline is None:
            getattr(stream, "close", lambda: None)()  # a stream left early releases the embedded model's lock
        else:
            getattr(pieces, "close", lambda: None)()  # an async stream: closed on its loop, cancelled if not done
    if not written and (content_type := _not_a_stream(stream)):  # litellm read it as an empty reply
        raise UnusableStream(f"the server's reply is not a stream of events (Content-Type: {content_type}), so "
                              "no completion")
    return litellm.stream_chunk_builder(chunks, messages=messages)


def _not_a_stream(stream: Any) -> str | None:
    """The content type of a streamed call's response when it is no stream of events (a proxy's web page, a JSON
    body), which litellm reads as a reply with no text; None for a stream (SSE, Ollama's JSON lines, Bedrock's) or
    a response without headers (the embedded model)."""
    headers = (getattr(stream, "_hidden_params", None) or {}).get("additional_headers") or {}
    content_type = str(headers.get("llm_provider-content-type") or "").split(";")[0].strip()
    streams = ("event-stream", "ndjson", "eventstream")
    return content_type if content_type and not any(s in content_type.lower() for s in streams) else None


def _usage_option(alias: ModelAlias) -> dict[str, Any]:
    """``stream_options`` asking for the usage in the stream, where the provider takes it (litellm refuses it for
    the others, and counts their tokens from the chunks)."""
    import litellm

    if alias.embedded:
        return {"stream_options": {"include_usage": True}}
    _, provider, _, _ = litellm.get_llm_provider(alias.model, api_base=alias.api_base)
    takes = "stream_options" in (litellm.get_supported_openai_params(model=alias.model, custom_llm_provider=provider)
                                 or [])
    return {"stream_options": {"include_usage": True}} if takes else {}


def complete_many(prompts: Sequence[Prompt], *, model: str = "local", concurrency: int | None = None,
                  on_text: Callable[[int, str], None] | None = None, seeds: Sequence[int | None] | None = None,
                  **options: Any) -> list[Completion | LLMError]:
    """``complete`` for each prompt, in order; a failed call is its ``LLMError`` in the list, not a raise.

    Calls run ``concurrency`` at a time (default: the alias's ``max_parallel_requests``, else 4); with every
    other call of the process to that alias they never pass its ``max_parallel_requests`` (``_slot``: litellm's
    Router holds its slots for async calls only). The embedded model runs one at a time. With ``on_text`` the
    replies are streamed: it gets the prompt's position and each piece of its reply. ``FlowCancelled`` is raised,
    never listed.

    ``seeds`` gives each prompt's ``seed`` (None: the call draws its own sample), as ``options`` would give one to
    all. Under a step that runs with the step cache (a ``CallMemo`` in force, ``operators.call_memo``), each reply
    at temperature 0 or with a seed is recorded as it arrives and a call recorded before is read back instead of
    sent (``replayed``): a rerun after a Ctrl-C mid-batch sends only the calls that had not finished.
    """
    alias = resolve(model)
    limit = alias.max_parallel_requests
    workers = max(1, min(len(prompts), concurrency or limit or 4, limit or len(prompts)))
    each = [dict(options, **({} if seeds is None or seeds[i] is None else {"seed": seeds[i]}))
            for i in range(len(prompts))]
    # above temperature 0 an unseeded call samples afresh: neither kept nor read back
    memo = current_memo() if all(o.get("temperature", 0.0) == 0 or o.get("seed") is not None for o in each) \
        else None
    ids: list[bytes] = []
    kept: dict[bytes, dict[str, Any]] = {}
    if memo is not None and prompts:
        ids = [call_id(model=model, alias=alias.model_dump(exclude={"description"}), prompt=prompt, options=each[i])
               for i, prompt in enumerate(prompts)]
        kept = memo.recall(ids)

    def one(position: int, prompt: Prompt) -> Completion | LLMError:
        if (reply := kept.get(ids[position]) if kept else None) is not None:
            done = Completion(**{**reply, "replayed": True})
            if on_text is not None:
                on_text(position, done.text)  # the whole reply as one piece
            return done
        pieces = None if on_text is None else (lambda piece: on_text(position, piece))
        try:
            done = complete(prompt, model=model, on_text=pieces, **each[position])
        except LLMError as err:
            return err  # not kept: a failure is asked again
        if memo is not None:
            memo.record(ids[position], done.model_dump(exclude={"replayed"}))
        return done

    return each_concurrently(one, prompts, workers)


def named(model: str, alias: ModelAlias) -> str:
    """Which model a failed call asked, for its message: the alias, its litellm string and its server, never a
    key (``model 'gemma2' (ollama_chat/gemma2 at http://localhost:11434)``)."""
    from operators.llm.reachable import server_of

    server = server_of(alias)
    target = f"{alias.model} at {server}" if server else alias.model
    return f"model '{model}'" if target == model else f"model '{model}' ({target})"
