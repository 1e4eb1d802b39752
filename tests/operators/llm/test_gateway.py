"""The gateway through litellm: the embedded model for real, and the local fault server for failures."""

from __future__ import annotations

import pytest

from operators.llm import Completion, LLMError, aliases, complete, complete_many, resolve


@pytest.mark.slow
def test_the_embedded_model_answers_for_real():
    done = complete("What do bees make? Answer in one word.", model="local", max_tokens=8)
    assert isinstance(done, Completion) and done.text.strip()
    assert done.prompt_tokens > 5 and 0 < done.completion_tokens <= 8 and done.seconds > 0
    assert done.model == "local"


@pytest.mark.integration
def test_a_prompt_over_the_embedded_models_context_is_a_bad_request_that_says_so():
    for on_text in (None, [].append):  # whole and streamed
        with pytest.raises(LLMError) as err:
            complete("bee " * 5000, model="local", max_tokens=4, on_text=on_text)
        assert err.value.kind == "bad_request"  # the caller's to shorten, and not retried
        assert err.value.message == ("model 'local' (tessera/smollm2-135m-instruct): ContextWindowExceededError: the "
                                     "messages are 5,031 tokens, and the model reads "
                                     "at most 4,096 (its context window, the answer included): send less (in "
                                     "a chat, start a new conversation; in a flow, lower the step's "
                                     "max_context_length or max_tokens, or shorten the query)")


def test_packaged_aliases_and_a_user_file_over_them(tmp_path, monkeypatch):
    found = aliases()
    assert {"local", "gemma2", "qwen2.5", "llama3.1", "DeepSeekv3"} <= set(found)
    assert found["local"].embedded and found["DeepSeekv3"].model == "deepseek/deepseek-chat"
    user = tmp_path / "models.yaml"
    user.write_text("gemma2: ollama_chat/gemma2:27b\nmine: {model: openai/gpt-4o-mini, api_key_env: MY_KEY}\n")
    monkeypatch.setenv("TESSERA_MODELS", str(user))
    assert resolve("gemma2").model == "ollama_chat/gemma2:27b" and resolve("mine").api_key_env == "MY_KEY"
    assert resolve("local").embedded  # the packaged entries stay
    assert resolve("anthropic/claude-x").model == "anthropic/claude-x"  # not an alias: litellm's string as is


def test_a_misspelt_model_is_refused_when_the_step_is_made_and_when_called():
    from operators import create
    from operators.errors import ParamsError

    with pytest.raises(ParamsError, match="unknown model 'gemma'.*did you mean 'gemma2'") as raised:
        create("generate.answer", {"model": "gemma"}, step_id="answer")
    assert raised.value.field == "params.model" and "tessera models" in raised.value.message
    with pytest.raises(ParamsError, match="unknown model 'nowhere/phi3'"):  # a provider litellm does not know
        create("summarize.documents", {"model": "nowhere/phi3"})
    with pytest.raises(ParamsError, match="unknown model 'Qwen2.5'.*did you mean 'qwen2.5'"):  # case alone
        create("generate.answer", {"model": "Qwen2.5"})
    for model in ("local", "gemma2", "ollama_chat/phi3", "openai/gpt-4o-mini", "gpt-4o"):  # aliases, litellm's
        assert create("generate.answer", {"model": model}).params.model == model
    with pytest.raises(LLMError, match="unknown model 'nosuchalias'") as raised:
        complete("hi", model="nosuchalias")
    assert raised.value.kind == "not_found"


@pytest.mark.parametrize("model", ["openai/", "ollama_chat/", "deepseek/ "])
def test_a_provider_with_no_model_after_it_is_refused_in_a_step_and_in_a_models_file(model, tmp_path, monkeypatch):
    """``answer.model=openai/`` was taken: the run did its retrieval, then asked the provider for model ''; an alias
    ``mine: openai/`` alike."""
    from operators import create
    from operators.errors import ParamsError
    from operators.llm.aliases import aliases
    from operators.llm.models_file import ModelConfigError

    provider = model.split("/")[0]
    with pytest.raises(ParamsError) as raised:
        create("generate.answer", {"model": model}, step_id="answer")
    assert raised.value.field == "params.model" and f"model '{model}' names no model after its provider: give " \
        f"'provider/name', such as '{provider}/<model>'" in raised.value.message, raised.value.message
    with pytest.raises(LLMError, match="names no model after its provider") as called:
        complete("hi", model=model)
    assert called.value.kind == "not_found"
    models = tmp_path / "models.yaml"
    models.write_text(f"mine: {{model: '{model}'}}\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    with pytest.raises(ModelConfigError, match="names no model after its provider") as read:
        aliases()
    assert read.value.field == "mine.model"


def test_the_fault_server_through_litellm(fault_models):
    done = complete("Which insects make honey?", model="fault-ok", system="Be brief.", max_tokens=16)
    assert done.text == fault_models.reply
    assert done.prompt_tokens == len("Be brief. Which insects make honey?".split())
    assert done.completion_tokens == len(fault_models.reply.split())
    body = fault_models.bodies[-1]
    assert body["messages"][0] == {"role": "system", "content": "Be brief."} and body["max_tokens"] == 16


def test_a_server_error_is_retried_by_litellm_then_raised(fault_models):
    assert complete("hi", model="fault-flaky", num_retries=1).text == fault_models.reply
    assert fault_models.attempts["flaky"] == 2
    with pytest.raises(LLMError) as err:
        complete("hi", model="fault-error", num_retries=1)
    assert fault_models.attempts["error"] == 2 and err.value.kind == "api"


def test_a_timeout_and_a_rate_limit_say_so(fault_models):
    with pytest.raises(LLMError) as err:
        complete("hi", model="fault-slow", timeout=0.2, num_retries=0)  # the reply would come after 5 s
    assert err.value.kind == "timeout"
    with pytest.raises(LLMError) as err:
        complete("hi", model="fault-ratelimit", num_retries=0)
    assert err.value.kind == "rate_limit"


def closed_port() -> int:
    """A localhost port nothing listens on."""
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        return closed.getsockname()[1]


def test_a_server_that_refuses_the_connection_is_a_connection_error_naming_the_model(tmp_path, monkeypatch):
    """The message names the alias, its litellm model and its server (never a key or a URL's password), for an
    OpenAI-compatible server (litellm: "Connection error.") and for Ollama (litellm: "[Errno 111]"), and says what to
    do (it said "connection refused" and no more: a run asking gemma2 with no Ollama running was left to guess)."""
    port = closed_port()
    models = tmp_path / "models.yaml"
    models.write_text(f"gone: {{model: openai/x, api_base: 'http://127.0.0.1:{port}/v1', api_key_env: GONE_KEY}}\n"
                      f"gone_ollama: {{model: ollama_chat/gemma2, api_base: 'http://127.0.0.1:{port}'}}\n"
                      f"gone_vllm: {{model: hosted_vllm/q, api_base: 'http://me:pa55@127.0.0.1:{port}/v1'}}\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    monkeypatch.setenv("GONE_KEY", "sk-test-secret")
    server = "connection refused: no server listens there; start it, or change the alias's api_base in its models file"
    ollama = "connection refused: no Ollama server runs there; start it there, or change the alias's api_base"
    expected = {"gone": (f"openai/x at http://127.0.0.1:{port}/v1", server),
                "gone_ollama": (f"ollama_chat/gemma2 at http://127.0.0.1:{port}", ollama),
                "gone_vllm": (f"hosted_vllm/q at http://127.0.0.1:{port}/v1", server)}  # (its password left out)
    for model, (where, said) in expected.items():
        with pytest.raises(LLMError) as err:
            complete("hi", model=model, num_retries=0)
        assert err.value.kind == "connection" and err.value.seconds > 0, err.value.message
        assert err.value.message.startswith(f"model '{model}' ({where}): {said}"), err.value.message
        assert err.value.message.endswith("or pick another model (tessera models says which answer)")
    monkeypatch.setenv("OLLAMA_API_BASE", f"http://127.0.0.1:{port}")  # the built-in gemma2, no Ollama running
    with pytest.raises(LLMError) as err:
        complete("hi", model="gemma2", num_retries=0)
    assert "no Ollama server runs there; start it (ollama serve), or set OLLAMA_API_BASE to where it runs" in \
        err.value.message, err.value.message


def test_an_unset_provider_key_is_auth_and_never_sent(tmp_path, monkeypatch):
    """``openai/...`` without $OPENAI_API_KEY, named as it is or by an alias with an api_base and no api_key_env:
    refused at once as ``auth`` (litellm would retry its "Missing credentials" error, then call it a server error),
    which is what ``tessera models`` and a flow's pre-run check say too."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    models = tmp_path / "models.yaml"
    models.write_text(f"nokey_openai: {{model: openai/smollm2, api_base: 'http://127.0.0.1:{closed_port()}/v1'}}\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    for model in ("openai/gpt-4o-mini", "nokey_openai"):  # sent, either would be a connection error (no network)
        with pytest.raises(LLMError) as err:
            complete("hi", model=model)
        assert err.value.kind == "auth" and "needs its key in $OPENAI_API_KEY" in err.value.message
        assert err.value.seconds == 0


def test_an_empty_provider_key_is_unset_too_and_the_flow_is_refused_before_it_runs(tmp_path, monkeypatch):
    """``export OPENAI_API_KEY=`` (empty): litellm's check asks only whether the name is there, so the run went on and
    every answer failed after the retrieval with "Missing credentials", where an alias's empty api_key_env was
    refused before the run. A provider that needs no key (vLLM on its api_base) still declares none."""
    from flows.env_check import MissingEnvError, check_env
    from flows.spec import FlowSpec
    from operators.llm.aliases import key_env

    monkeypatch.setenv("OPENAI_API_KEY", "")
    monkeypatch.setenv("HOSTED_VLLM_API_KEY", "")
    models = tmp_path / "models.yaml"
    base = f"http://127.0.0.1:{closed_port()}/v1"
    models.write_text(f"nokey_openai: {{model: openai/smollm2, api_base: '{base}'}}\n"
                      f"own_vllm: {{model: hosted_vllm/m, api_base: '{base}'}}\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    assert key_env("openai/gpt-4o-mini") == key_env("nokey_openai") == "OPENAI_API_KEY"
    assert key_env("own_vllm") is None and key_env("local") is None
    with pytest.raises(LLMError) as err:
        complete("hi", model="openai/gpt-4o-mini")
    assert err.value.kind == "auth" and "needs its key in $OPENAI_API_KEY" in err.value.message
    spec = FlowSpec.parse({"name": "answers", "steps": {
        "context": {"op": "generate.context"}, "answer": {"op": "generate.answer", "params": {
            "model": "openai/gpt-4o-mini"}}}})
    with pytest.raises(MissingEnvError) as refused:
        check_env(spec)
    assert refused.value.field == "steps.answer.params.model" and "$OPENAI_API_KEY" in refused.value.message


def test_litellms_missing_credentials_error_is_classed_auth(monkeypatch):
    """Should a call get through without a key, litellm's error for it (an ``InternalServerError`` whose message says
    "Missing credentials") is ``auth``, not ``api``: classed by litellm's class first, its message second."""
    import litellm

    from operators.llm.failures import failure_kind

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(Exception) as raised:
        litellm.completion(model="openai/x", api_base=f"http://127.0.0.1:{closed_port()}/v1", num_retries=0,
                           messages=[{"role": "user", "content": "hi"}])
    assert "Missing credentials" in str(raised.value) and failure_kind(raised.value) == "auth"


def test_a_misspelt_or_missing_embedded_model_is_refused_before_any_call(tmp_path, monkeypatch):
    """A misspelt embedded name is refused when the step is made (from the name alone); a .gguf file that is not
    there is declared by the step (``required_models``: the pre-run check refuses the flow) and refused by the
    gateway before the model is loaded."""
    from operators import create
    from operators.errors import ParamsError

    refused = "unknown embedded model 'smollm3': use one of smollm2-135m-instruct"
    with pytest.raises(ParamsError, match=refused) as raised:
        create("generate.answer", {"model": "tessera/smollm3"}, step_id="answer")
    assert raised.value.field == "params.model"
    gone = tmp_path / "nope.gguf"
    cases = {"tessera/smollm3": refused, f"tessera/{gone}": f"GGUF file {gone} does not exist"}
    for model, reason in cases.items():
        with pytest.raises(LLMError) as err:
            complete("hi", model=model)
        assert err.value.kind == "not_found" and err.value.message.startswith(f"model '{model}': {reason}")
    assert create("generate.answer", {"model": f"tessera/{gone}"}).required_models() == {"params.model": str(gone)}
    models = tmp_path / "models.yaml"  # an alias naming the file
    models.write_text(f"mine: tessera/{gone}\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    assert create("generate.answer", {"model": "mine"}).required_models() == {"params.model": str(gone)}
    gone.write_bytes(b"")  # there: nothing to declare (whether it loads is the call's to say)
    assert create("generate.answer", {"model": "mine"}).required_models() == {}
    assert create("generate.answer", {"model": "local"}).required_models() == {}


def test_keys_come_from_the_environment_only(fault_models, monkeypatch):
    monkeypatch.delenv("TESSERA_FAULT_KEY")
    with pytest.raises(LLMError) as err:
        complete("hi", model="fault-ok")
    assert err.value.kind == "auth" and "$TESSERA_FAULT_KEY" in err.value.message
    assert fault_models.attempts["ok"] == 0


def test_complete_many_lists_failures_in_place(fault_models):
    results = complete_many(["a", "b", "c"], model="fault-ok", concurrency=3)
    assert [r.text for r in results] == [fault_models.reply] * 3
    mixed = complete_many(["a"], model="fault-malformed", num_retries=0)
    assert isinstance(mixed[0], LLMError)


def test_an_aliases_max_parallel_requests_caps_a_steps_larger_concurrency(fault_models, tmp_path, monkeypatch):
    """litellm's Router holds no slot for a sync call, so without the cap 6 calls reached a server whose alias
    allows 2 (measured: peak 8 of 8 with `max_parallel_requests: 2`)."""
    monkeypatch.setenv("TESSERA_MODELS", str(fault_models.models_file(tmp_path / "two.yaml", max_parallel_requests=2)))
    monkeypatch.setattr(fault_models, "delay", 0.2)
    results = complete_many(["a", "b", "c", "d", "e", "f"], model="fault-slow", concurrency=6)
    assert [r.text for r in results] == [fault_models.reply] * 6
    assert fault_models.peak == 2  # at most the alias's limit, and all of it used
    fault_models.reset()  # (which puts its delay back to 5 s)
    fault_models.delay = 0.2
    complete_many(["a", "b"], model="fault-slow", concurrency=1)  # a smaller step concurrency stays
    assert fault_models.peak == 1


def test_max_parallel_requests_holds_for_the_process_not_for_each_batch(fault_models, tmp_path, monkeypatch):
    """Two steps of one process asking the same alias at once share its slots: each batch alone kept the limit,
    so together they sent twice it (measured: peak 4 of 2)."""
    import threading

    monkeypatch.setenv("TESSERA_MODELS", str(fault_models.models_file(tmp_path / "two.yaml", max_parallel_requests=2)))
    monkeypatch.setattr(fault_models, "delay", 0.2)
    results: list = []
    batches = [threading.Thread(target=lambda: results.extend(complete_many(["a", "b", "c"], model="fault-slow")))
               for _ in range(2)]
    for batch in batches:
        batch.start()
    for batch in batches:
        batch.join()
    assert [r.text for r in results] == [fault_models.reply] * 6
    assert fault_models.peak == 2  # the alias's limit across both batches, and all of it used


def test_a_streamed_reply_is_the_whole_reply_piece_by_piece(fault_models):
    pieces: list[str] = []
    done = complete("Which insects make honey?", model="fault-ok", max_tokens=16, on_text=pieces.append)
    whole = complete("Which insects make honey?", model="fault-ok", max_tokens=16)
    assert len(pieces) == len(fault_models.reply.split()) and "".join(pieces) == done.text == whole.text
    assert (done.prompt_tokens, done.completion_tokens) == (whole.prompt_tokens, whole.completion_tokens)
    assert done.finish_reason == "stop" and fault_models.bodies[0]["stream"] is True
    with pytest.raises(LLMError) as err:  # broken off after its first pieces: not retried, raised
        complete("hi", model="fault-midstream", on_text=pieces.append, num_retries=2)
    assert "broke off" in err.value.message and fault_models.attempts["midstream"] == 1


@pytest.mark.slow
def test_the_embedded_model_streams_the_reply_it_gives_whole():
    question = "Name one insect that makes honey."
    for max_tokens in (4, 64):  # stopped by max_tokens, and (the answer is short) by the end-of-text token
        pieces: list[str] = []
        streamed = complete(question, model="local", max_tokens=max_tokens, on_text=pieces.append)
        whole = complete(question, model="local", max_tokens=max_tokens)
        assert len(pieces) > 1 and "".join(pieces) == streamed.text == whole.text
        assert (streamed.prompt_tokens, streamed.completion_tokens, streamed.finish_reason) == (
            whole.prompt_tokens, whole.completion_tokens, whole.finish_reason)
    with pytest.raises(LLMError) as err:  # the timeout is checked between tokens, streamed too
        complete("Write a long story about bees.", model="local", max_tokens=400, timeout=0.2, on_text=pieces.append)
    assert err.value.kind == "timeout"


def test_a_model_of_a_server_of_ones_own_without_its_address_is_refused_before_any_call(tmp_path, monkeypatch,
                                                                                          llm_fault_server):
    """hosted_vllm/foo with no api_base failed each call after its retries ("Name or service not known", about
    30 s), naming no server: the pre-run check refuses the flow naming params.model, and a call is refused at
    once, as not_found."""
    import time

    from flows.model_check import check_env
    from flows.spec import FlowSpec
    from operators.errors import SpecError

    monkeypatch.delenv("HOSTED_VLLM_API_BASE", raising=False)
    models = tmp_path / "models.yaml"
    here = llm_fault_server.api_base("ok")  # a server that answers (one that does not: ModelUnreachableError)
    models.write_text(f"vllm_here: {{model: hosted_vllm/q, api_base: '{here}'}}\n"
                      "vllm_nowhere: {model: hosted_vllm/q}\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))

    def answering(model: str) -> FlowSpec:
        return FlowSpec.parse({"steps": {"bm25": {"op": "retrieve.bm25", "params": {"index": "/nowhere", "k": 3}},
                                         "context": {"op": "generate.context", "inputs": ["bm25"]},
                                         "answer": {"op": "generate.answer", "inputs": ["context"],
                                                    "params": {"model": model}}}})

    import litellm  # noqa: F401  (imported first: its import, seconds in a fresh process, is not the call's time)

    for model, named in (("hosted_vllm/foo", "model 'hosted_vllm/foo'"),
                         ("vllm_nowhere", "model 'vllm_nowhere' (hosted_vllm/q)")):
        with pytest.raises(SpecError) as err:
            check_env(answering(model))
        assert err.value.field == "steps.answer.params.model" and f"{named} names no server" in str(err.value)
        assert "$HOSTED_VLLM_API_BASE" in str(err.value)
        started = time.perf_counter()
        with pytest.raises(LLMError) as failed:
            complete("hi", model=model)
        assert failed.value.kind == "not_found" and time.perf_counter() - started < 2  # no retries
    check_env(answering("vllm_here"))
    monkeypatch.setenv("HOSTED_VLLM_API_BASE", here)  # litellm reads it
    check_env(answering("hosted_vllm/foo"))
