"""The embedded model: a GGUF model run in-process by llama.cpp, reached through litellm.

It is a litellm custom provider (``CustomLLM``) registered as ``tessera``, so ``tessera/smollm2-135m-instruct`` goes
through the same ``litellm`` call, options and exceptions as ``ollama_chat/gemma2`` or ``deepseek/deepseek-chat``.
Why in-process and not a llama.cpp server that Tessera starts: nothing to start, stop, port-allocate or leak, and
every process (a test, a Ray actor, a Serve replica) loads the weights once into the shared ``ObjectRepository``,
like the encoders. Calls to one model are serialised by a lock (a llama.cpp context is not thread-safe).

A model name is a packaged GGUF or a path to a ``.gguf`` file (``operators.llm.embedded_model``, which loads it).
The timeout and a flow's cancel are checked between generated tokens and, during the prompt's evaluation (a single
C call, seconds long on a small CPU), by llama.cpp's abort callback (``embedded_model.abortable``). That C call runs
on the model's worker thread while the caller waits for it, waking every 50 ms (``loading.awake_until_done``), so a
Ctrl-C reaches the caller's signal handler at once (Python runs handlers only in the main thread, between bytecodes)
and the evaluation stops within a graph node.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from concurrent.futures import wait
from typing import Any, Iterator

import numpy as np

from operators.errors import FlowCancelled
from operators.interrupt import current_check, interruptible
from operators.llm.embedded_model import load_for
from operators.llm.loading import awake_until_done

#: Options of a chat request that llama.cpp's create_chat_completion takes as they are.
LLAMA_OPTIONS = ("temperature", "top_p", "max_tokens", "stop", "seed", "presence_penalty", "frequency_penalty",
                 "response_format")
#: llama-cpp-python's logger, which prints llama.cpp's log (errors only, with verbose=False). The Serve LLM
#: deployment too quiets it while it aborts a decode, which llama.cpp logs as an error.
LLAMA_LOG = logging.getLogger("llama-cpp-python")


def _handler_class() -> type:
    from litellm import CustomLLM

    class EmbeddedLLM(CustomLLM):
        """litellm's view of the embedded models: llama.cpp's chat completion, whole or streamed."""

        def completion(self, *args: Any, **kwargs: Any) -> Any:
            return _complete(**kwargs)

        def streaming(self, *args: Any, **kwargs: Any) -> Any:
            return _stream(**kwargs)

    return EmbeddedLLM


def llama_options(request: dict[str, Any]) -> dict[str, Any]:
    """The options of a chat request that llama.cpp takes as they are (``LLAMA_OPTIONS``; OpenAI's
    ``max_completion_tokens`` as ``max_tokens``). A sampled reply that names no seed gets a fresh random one
    (llama-cpp-python's fixed default gave every new process the same first reply; temperature 0 is greedy). A seed
    given is taken modulo 2**32 - 1: llama.cpp reads 32 bits, and their last value (so -1 too) as "draw one"."""
    options = {key: request[key] for key in LLAMA_OPTIONS if request.get(key) is not None}
    if request.get("max_completion_tokens") is not None:
        options["max_tokens"] = request["max_completion_tokens"]
    if options.get("seed") is not None:
        options["seed"] %= 2**32 - 1
    elif options.get("temperature") != 0:  # (llama.cpp's default temperature: 0.2)
        options["seed"] = secrets.randbits(31)
    return options


def chat_completion(llama: Any, messages: list[dict[str, Any]], options: dict[str, Any], watch: Any,
                    stream: bool = False) -> Any:
    """llama.cpp's chat completion of ``messages``, ``watch`` called before each sampled token (a logits
    processor: it may record the token or end the generation with ``end_now``)."""
    from llama_cpp import LogitsProcessorList

    llama.reset()  # evaluate the whole prompt every time: reusing a cached prefix changes greedy answers
    try:
        answer = llama.create_chat_completion(messages=messages, logits_processor=LogitsProcessorList([watch]),
                                              stream=stream, **options)
    except ValueError as err:
        raise said_plainly(err) from None
    return _plain_errors(answer) if stream else answer


class ContextTooLong(ValueError):
    """A prompt at least as long as the model's context window: the caller's to shorten (a 400, not a 500)."""


def said_plainly(err: ValueError) -> ValueError:
    """llama.cpp's "Requested tokens (N) exceed context window of M" as a ``ContextTooLong`` that says what to do;
    any other error as it is."""
    import re

    found = re.search(r"Requested tokens \((\d+)\) exceed context window of (\d+)", str(err))
    if found is None:
        return err
    tokens, window = (int(n) for n in found.groups())
    return ContextTooLong(f"the messages are {tokens:,} tokens, and the model reads at most {window:,} (its context "
                          "window, the answer included): send less (in a chat, start a new conversation; in a flow, "
                          "lower the step's max_context_length or max_tokens, or shorten the query)")


def _plain_errors(chunks: Iterator[Any]) -> Iterator[Any]:
    """A stream's chunks; llama.cpp checks the prompt's length when the first is asked for."""
    try:
        yield from chunks
    except ValueError as err:
        raise said_plainly(err) from None


def end_now(llama: Any, logits: Any) -> Any:
    """``logits`` that leave llama.cpp only the end-of-text token: how a logits processor stops a generation (an
    exception raised there, in a callback from C, would be lost)."""
    logits[:] = -np.inf
    logits[llama.token_eos()] = 0.0
    return logits


class _Call:
    """One generation's setup: the loaded model, its options, and a watch on each token for the timeout and a
    flow's cancel (llama.cpp calls the watch from C, where an exception would be lost: it forces the
    end-of-text token, and ``raise_if_stopped`` says why after the call)."""

    def __init__(self, model: str, optional_params: dict[str, Any], timeout: Any) -> None:
        self.model = model
        self.llama, self.lock = load_for(model)
        timeout = getattr(timeout, "read", timeout)  # an httpx.Timeout: its read timeout
        self.seconds = float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else None
        self.params = llama_options(optional_params)
        self.started = time.perf_counter()
        self.check = current_check()  # the caller's cancel check, for the worker thread and the abort callback
        self.stopped: set[str] = set()
        self.log_level: int | None = None  # llama.cpp's log level while an aborted call ends
        self.interrupted = False  # the caller stopped waiting (KeyboardInterrupt): abort the C call
        self.sampled: list[int] = []  # the context's length before each sampled token (streamed usage)

    def _should_stop(self) -> bool:
        """Whether to end the generation (between tokens) or abort the decode under way (abort callback)."""
        if self.interrupted:
            self.stopped.add("interrupted")
        try:
            if self.check is not None:
                self.check()  # (captured: the abort callback may run on a thread of llama.cpp's own)
        except FlowCancelled:
            self.stopped.add("cancelled")
        if self.seconds is not None and time.perf_counter() - self.started > self.seconds:
            self.stopped.add("timeout")
        if self.stopped and self.log_level is None:  # llama.cpp logs an abort as an error: it is not one
            self.log_level = LLAMA_LOG.level
            LLAMA_LOG.setLevel(logging.CRITICAL)
        return bool(self.stopped)

    def _watch(self, tokens: Any, logits: Any) -> Any:
        self.sampled.append(len(tokens))
        return end_now(self.llama, logits) if self._should_stop() else logits

    def generate(self, messages: list[dict[str, Any]], stream: bool) -> Any:
        answer = self.waiting(chat_completion, self.llama, messages, self.params, self._watch, stream)
        return self._stepped(answer) if stream else answer

    def _stepped(self, chunks: Iterator[Any]) -> Iterator[Any]:
        """A stream's chunks, each computed on the worker thread (the first evaluates the prompt)."""
        done = object()
        try:
            while (chunk := self.waiting(next, chunks, done)) is not done:
                yield chunk
        finally:
            getattr(chunks, "close", lambda: None)()  # (not running: the worker is done with it)

    def waiting(self, call: Any, *args: Any) -> Any:
        """``call(*args)`` on the model's worker thread, waited for here, where a signal handler can run. A
        ``KeyboardInterrupt`` in the wait aborts the call (within a graph node) before it is raised; a decode
        aborted by a cancel or the timeout is said by ``raise_if_stopped``."""
        def carried() -> Any:
            with interruptible(self.check):
                return call(*args)

        future = self.llama.tessera_worker.submit(carried)
        try:
            return awake_until_done(future)
        except BaseException as err:
            if not future.done():  # interrupted while waiting: stop the C call, then go
                self.interrupted = True
                wait([future])
            elif self.stopped and isinstance(err, RuntimeError) and "llama_decode returned" in str(err):
                self.raise_if_stopped()  # aborted by the abort callback: say why
            raise

    @contextlib.contextmanager
    def generating(self) -> Iterator[None]:
        """The model's lock while it generates, its abort callback watching this call; messages over its
        context window are litellm's ``ContextWindowExceededError`` (a bad request, which litellm does not
        retry)."""
        import litellm

        with self.lock:
            self.llama.tessera_watch(self._should_stop)
            try:
                yield
            except ContextTooLong as err:
                raise litellm.ContextWindowExceededError(message=str(err), model=self.model,
                                                         llm_provider="tessera") from None
            finally:
                self.llama.tessera_watch(None)
                if self.log_level is not None:
                    LLAMA_LOG.setLevel(self.log_level)

    def raise_if_stopped(self) -> None:
        import litellm

        if self.check is not None:
            self.check()  # cancelled: FlowCancelled (the gateway raises it as itself)
        if "cancelled" in self.stopped:
            raise FlowCancelled("cancelled")
        if self.stopped:
            raise litellm.Timeout(message=f"the embedded model took more than {self.seconds:g} s", model=self.model,
                                  llm_provider="tessera")


def _complete(*, model: str, messages: list[dict[str, Any]], optional_params: dict[str, Any],
              timeout: Any = None, **_: Any) -> Any:
    import litellm

    call = _Call(model, optional_params, timeout)
    with call.generating():
        response = call.generate(messages, stream=False)
    call.raise_if_stopped()
    response["model"] = model
    return litellm.ModelResponse(**response)


def _stream(*, model: str, messages: list[dict[str, Any]], optional_params: dict[str, Any],
            timeout: Any = None, **_: Any) -> Iterator[dict[str, Any]]:
    """litellm's ``GenericStreamingChunk`` s, one per token, the last with the usage (counted, as llama.cpp
    streams none)."""
    call = _Call(model, optional_params, timeout)
    finish = None
    with call.generating():
        for chunk in call.generate(messages, stream=True):
            choice = chunk["choices"][0]
            finish = choice.get("finish_reason") or finish
            if choice["delta"].get("content"):
                yield {"text": choice["delta"]["content"], "is_finished": False, "finish_reason": "", "usage": None,
                       "index": 0, "tool_use": None}
    call.raise_if_stopped()
    prompt, completion = streamed_usage(call.sampled, finish, bool(call.params.get("stop")))
    yield {"text": "", "is_finished": True, "finish_reason": finish or "stop", "index": 0, "tool_use": None,
           "usage": usage_of(prompt, completion)}


def usage_of(prompt: int, completion: int) -> dict[str, int]:
    """OpenAI's ``usage`` object of a reply with these token counts."""
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def streamed_usage(sampled: list[int], finish_reason: str | None, stop_strings: bool) -> tuple[int, int]:
    """Prompt and completion tokens of a streamed reply (llama.cpp streams no usage), from the context's length
    before each sampled token (``sampled``).

    The prompt is the context before the first sampled token, and every sampled token is a completion token
    except an end-of-text token, which ends a reply whose finish reason is ``stop`` when the request gave no
    ``stop`` strings (with them, a reply that ends on end-of-text counts one token more than llama.cpp's
    non-streamed usage).
    """
    if not sampled:
        return 0, 0
    ended = finish_reason == "stop" and not stop_strings
    return sampled[0], len(sampled) - (1 if ended else 0)


_registered = threading.Lock()


def register() -> None:
    """Make ``tessera/<name>`` a litellm model in this process (idempotent)."""
    import litellm

    with _registered:
        if any(entry.get("provider") == "tessera" for entry in litellm.custom_provider_map):
            return
        with contextlib.suppress(ImportError):  # (said when the model loads, with the install line)
            import llama_cpp  # noqa: F401  (0.2-0.4 s) here, on the loading thread of the Router, not when it loads
        litellm.custom_provider_map = [*litellm.custom_provider_map,
                                       {"provider": "tessera", "custom_handler": _handler_class()()}]
        from litellm.utils import custom_llm_setup

        custom_llm_setup()
