"""Language-model deployments behind ``/v1/chat/completions``: llama.cpp on CPU replicas, vLLM on GPU nodes.

Both engines answer the same call, ``handle.options(stream=True).chat.remote(request)``, an
async generator: the whole ``ChatCompletionResponse`` once, or with ``stream: true`` the
server-sent events (``data: {...}\\n\\n`` strings, or lists of them). That is the
interface of ``ray.serve.llm``'s ``LLMServer``, so the ingress has one code path, and
everything up to the engine is tested with the CPU engine.

Concurrency on CPU: a llama.cpp context decodes one sequence at a time (and is not
thread-safe), so a replica runs its requests one after another on ``threads`` cores;
concurrency is replicas × 1, with ``max_ongoing_requests`` a small queue per replica so
that Serve sends the others to idle replicas. Continuous batching (vLLM) needs a GPU;
llama.cpp's parallel slots (its server's ``-np``) would mean a server process per replica,
where replicas get Serve's routing and autoscaling for free.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
import time
from typing import Any, AsyncIterator

from ray import serve

from serve.settings import LLMDeploymentArgs

log = logging.getLogger("ray.serve")
#: The one event of an answer whose messages are longer than the model reads (``{TOO_LONG: why}``): the caller's to
#: shorten, a 400 at the ingress (``serve.chat.chat.opened``). Raised, it was logged here as a failed request, traceback
#: and all, at every over-long conversation.
TOO_LONG = "tessera_context_too_long"


@serve.deployment(name="llm")
class LlamaCppDeployment:
    """A GGUF model (the embedded SmolLM2 by default) on llama.cpp, one sequence at a time per replica."""

    def __init__(self, name: str, model: str, threads: int) -> None:
        from operators.llm.embedded_model import load

        self.name, self.model = name, model
        self.llama, self.lock = load(model, threads=threads)
        #: Requests answered, and tokens sampled.
        self.requests = self.tokens = 0
        warm = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
        self._generate(warm, threading.Event())  # warm: RUNNING = ready
        log.info("%s: %s loaded on %d llama.cpp thread(s) in replica pid %s", name, model, threads, os.getpid())

    def _generate(self, body: dict[str, Any], stopped: threading.Event, stream: bool = False,
                  sampled: list[int] | None = None) -> Any:
        """llama.cpp's chat completion of ``body``; it ends at the next token once ``stopped`` is set (its prompt's
        evaluation is aborted: ``_turn``). ``sampled`` gets the context's length before each sampled token (a
        streamed answer's usage)."""
        from operators.llm.embedded import chat_completion, end_now, llama_options

        def watch(input_ids: Any, logits: Any) -> Any:
            self.llama.tessera_watch(None)  # the prompt is in: from here ``stopped`` is read at each token
            self.tokens += 1
            if sampled is not None:
                sampled.append(len(input_ids))
            return end_now(self.llama, logits) if stopped.is_set() else logits

        return chat_completion(self.llama, body["messages"], llama_options(body), watch, stream)

    async def chat(self, body: dict[str, Any]) -> AsyncIterator[Any]:
        """The completion (a dict), or with ``stream`` its SSE events; the generation runs on a worker thread.

        A request that Serve cancels (its caller cancelled it, or an HTTP client went away) stops the generation
        at its next token, so the replica's one sequence at a time goes to the next request."""
        from operators.llm.embedded import ContextTooLong

        self.requests += 1
        model, stopped = body.get("model") or self.name, threading.Event()
        try:
            if not body.get("stream"):
                def once() -> dict[str, Any] | None:
                    with self._turn(stopped) as go:
                        return self._choices(body, stopped) if go else None
                answer = await asyncio.to_thread(once)
                yield {**answer, "model": model}
                return
            loop, queue = asyncio.get_running_loop(), asyncio.Queue()
            threading.Thread(target=self._stream_into, args=(body, stopped, loop, queue, model), daemon=True).start()
            while (event := await queue.get()) is not None:
                if isinstance(event, Exception):
                    raise event
                yield event
            yield "data: [DONE]\n\n"
        except ContextTooLong as err:  # before any token: nothing was sent yet
            yield {TOO_LONG: str(err)}
        finally:
            stopped.set()

    def _choices(self, body: dict[str, Any], stopped: threading.Event) -> dict[str, Any]:
        """The completion of ``body``; with ``n`` above 1 that many, written one after another and merged as OpenAI
        merges them: ``choices`` by index, the prompt's tokens counted once, the completions' summed."""
        answers = [self._generate(choice_body(body, 0), stopped)]
        for i in range(1, body.get("n", 1)):
            if stopped.is_set():
                break
            answers.append(self._generate(choice_body(body, i), stopped))
        if len(answers) == 1:
            return answers[0]
        from operators.llm.embedded import usage_of

        completion = sum(a["usage"]["completion_tokens"] for a in answers)
        return {**answers[0], "choices": [{**a["choices"][0], "index": i} for i, a in enumerate(answers)],
                "usage": usage_of(answers[0]["usage"]["prompt_tokens"], completion)}

    def _stream_into(self, body: dict[str, Any], stopped: threading.Event, loop: Any, queue: asyncio.Queue,
                     model: str) -> None:
        """Generate on this thread, handing each chunk to the event loop as an SSE event (None ends); with ``n``
        above 1 each choice's chunks in turn, under its index."""
        put = lambda item: loop.call_soon_threadsafe(queue.put_nowait, item)  # noqa: E731
        written: list[tuple[list[int], str | None]] = []  # per choice: the context's length before each sampled
        chunk: dict[str, Any] = {}                        # token, and why it ended
        head: dict[str, Any] = {}

        try:
            with self._turn(stopped) as go:
                for i in range(body.get("n", 1) if go else 0):
                    if i and stopped.is_set():
                        break
                    sampled: list[int] = []
                    for chunk in self._generate(choice_body(body, i), stopped, stream=True, sampled=sampled):
                        head = head or {"id": chunk.get("id"), "created": chunk.get("created")}  # one stream's
                        chunk = {**chunk, **head, "model": model,
                                 "choices": [{**c, "index": i} for c in chunk["choices"]]}
                        put(f"data: {json.dumps(chunk)}\n\n")
                    written.append((sampled, (chunk.get("choices") or [{}])[0].get("finish_reason")))
            if (body.get("stream_options") or {}).get("include_usage") and any(s for s, _ in written):
                put(f"data: {json.dumps(usage_chunk(chunk, model, written, bool(body.get('stop'))))}\n\n")
        except Exception as err:  # noqa: BLE001  (raised to the caller by chat())
            put(err)
        put(None)

    @contextlib.contextmanager
    def _turn(self, stopped: threading.Event) -> Any:
        """The model's lock for one request; yields whether to generate: not for a request whose caller left while
        it waited for the lock. Until the first sampled token llama.cpp's abort callback watches ``stopped`` (the
        token watch comes only after the prompt's evaluation, seconds for a long prompt), so a caller that leaves
        then frees the replica within a graph node; the aborted decode is not an error."""
        from operators.llm.embedded import LLAMA_LOG

        with self.lock:
            if stopped.is_set():
                yield False
                return
            level = LLAMA_LOG.level

            def should_stop() -> bool:
                if stopped.is_set():
                    LLAMA_LOG.setLevel(logging.CRITICAL)  # llama.cpp logs an abort as an error: it is not one
                return stopped.is_set()

            self.llama.tessera_watch(should_stop)
            try:
                yield True
            except RuntimeError as err:
                if not (stopped.is_set() and "llama_decode returned" in str(err)):
                    raise
            finally:
                self.llama.tessera_watch(None)
                LLAMA_LOG.setLevel(level)

    def info(self) -> dict[str, Any]:
        return {"name": self.name, "engine": "llama_cpp", "model": self.model, "requests": self.requests,
                "tokens": self.tokens,
                "pid": os.getpid(), "time": time.time()}


def choice_body(body: dict[str, Any], index: int) -> dict[str, Any]:
    """The request for choice ``index`` of ``n``: a seed the client gave is the first choice's, the next choices
    get seed + 1, ... (the same seed would write the same reply again); without one each draws a fresh seed."""
    from operators.llm.seeds import moved_seed

    return {**body, "seed": moved_seed(body["seed"], index)} if index and body.get("seed") is not None else body


def usage_chunk(last: dict[str, Any], model: str, written: list[tuple[list[int], str | None]],
                stop_strings: bool) -> dict[str, Any]:
    """OpenAI's closing chunk of a stream asked for with ``stream_options.include_usage``: no choices, the usage
    of every choice written (each counted as ``streamed_usage`` says; the prompt once)."""
    from operators.llm.embedded import streamed_usage, usage_of

    counts = [streamed_usage(sampled, finish, stop_strings) for sampled, finish in written if sampled]
    return {"id": last.get("id"), "object": "chat.completion.chunk", "created": last.get("created"), "model": model,
            "choices": [], "usage": usage_of(counts[0][0], sum(c for _, c in counts))}


def engine_problem(llm: LLMDeploymentArgs) -> tuple[str, str] | None:
    """Why ``llm`` cannot be served from this machine (None if it can): weights or engine not installed; and that
    reason worded without this machine's paths, as its card gives it to clients (a missing .gguf by its name)."""
    import importlib.util

    if llm.engine == "vllm":
        if importlib.util.find_spec("vllm") is None:
            why = "the vllm engine needs vLLM, which is not installed here: pip install 'tessera[gpu]' (GPU nodes)"
            return why, why
        return None
    from operators.llm.embedded_model import ENGINE_MISSING, gguf_path, llama_cpp_installed
    from operators.models.references import ModelNotFoundError

    try:
        gguf_path(llm.model)
    except ModelNotFoundError as err:
        return err.message, err.public
    return None if llama_cpp_installed() else (ENGINE_MISSING, ENGINE_MISSING)


def llm_deployment(llm: LLMDeploymentArgs) -> Any:
    """The bound deployment serving ``llm`` with its engine."""
    scaling = llm.autoscaling
    autoscaling = {"min_replicas": scaling.min_replicas, "initial_replicas": max(scaling.min_replicas, 1),
                   "max_replicas": scaling.max_replicas, "target_ongoing_requests": scaling.target_ongoing_requests}
    if llm.engine == "vllm":
        return vllm_deployment(llm, autoscaling)
    return LlamaCppDeployment.options(
        name=llm.deployment_name, max_ongoing_requests=llm.max_ongoing_requests, autoscaling_config=autoscaling,
        ray_actor_options={"num_cpus": llm.threads if llm.num_cpus is None else llm.num_cpus},
    ).bind(llm.name, llm.model, llm.threads)


def vllm_deployment(llm: LLMDeploymentArgs, autoscaling: dict[str, Any]) -> Any:
    """``ray.serve.llm``'s vLLM deployment (``LLMConfig`` + ``build_llm_deployment``), one GPU per replica."""
    try:
        from ray.serve.llm import LLMConfig, build_llm_deployment
    except ImportError as err:
        raise ImportError(f"model '{llm.name}' uses the vllm engine, which needs vLLM: pip install "
                          f"'tessera[gpu]' on the GPU nodes ({err})") from None
    config = LLMConfig(
        model_loading_config={"model_id": llm.name, "model_source": llm.model},
        deployment_config={"autoscaling_config": autoscaling, "max_ongoing_requests": llm.max_ongoing_requests},
        engine_kwargs=llm.engine_kwargs, accelerator_type=llm.accelerator_type)
    return build_llm_deployment(config, override_serve_options={"name": llm.deployment_name})


def vllm_request(body: dict[str, Any]) -> Any:
    """The request object ``LLMServer.chat`` takes (vLLM's ChatCompletionRequest)."""
    from ray.serve.llm.openai_api_models import ChatCompletionRequest

    return ChatCompletionRequest(**body)
