"""What a flow from the network may not name (serve/security/spec_guard.py): the server's environment variables,
language models other than aliases, model paths outside the model repository; and text a spec cannot hold. Through the
service's own request preparation (``Service.prepare``, what every flow route calls first); nothing runs, so no
Ray."""

from __future__ import annotations

import pytest

from operators.errors import SpecError
from serve.http.errors import ApiError
from serve.service import Service


@pytest.fixture
def service(make_service, monkeypatch):
    monkeypatch.delenv("TESSERA_ALLOW_ENV", raising=False)
    return make_service()


def refused(service: Service, steps: dict, code: str) -> ApiError:
    with pytest.raises(ApiError) as err:
        service.prepare({"flow": {"steps": steps}, "query": "honey"}, "local")
    assert (err.value.status, err.value.code) == (422, code), err.value.message
    return err.value


def prepared(service: Service, steps: dict) -> None:
    try:
        service.prepare({"flow": {"steps": steps}, "query": "honey"}, "local")
    except ApiError as err:  # guarded first: a model this machine lacks, or one of another kind, comes after
        assert err.code in ("model_not_found", "wrong_model_kind"), err.message


RERANK = {"op": "rerank.api", "params": {"url": "https://rerank.example.com/v1/rerank"}}


def test_a_key_from_the_servers_environment_only_when_its_operator_allows_that_variable(service, monkeypatch):
    bm25 = {"op": "retrieve.bm25", "params": {"k": 3}}
    for name in ("TESSERA_API_KEYS", "HOME", "COHERE_API_KEY"):
        steps = {"bm25": bm25, "r": {**RERANK, "params": {**RERANK["params"], "api_key_env": name}}}
        error = refused(service, steps, "env_not_allowed")
        assert error.param == "steps.r.params.api_key_env" and "TESSERA_ALLOW_ENV (it lists none)" in error.message
    monkeypatch.setenv("TESSERA_ALLOW_ENV", "COHERE_API_KEY, TESSERA_API_KEYS")
    monkeypatch.setenv("COHERE_API_KEY", "k-123")  # allowed and set (unset: env_not_set, the next test)
    allowed = {"bm25": bm25, "r": {**RERANK, "params": {**RERANK["params"], "api_key_env": "COHERE_API_KEY"}}}
    prepared(service, allowed)
    keys = {"bm25": bm25, "r": {**RERANK, "params": {**RERANK["params"], "api_key_env": "TESSERA_API_KEYS"}}}
    assert "(it lists COHERE_API_KEY)" in refused(service, keys, "env_not_allowed").message  # the service's keys, never
    mosaic = {"m": {"op": "sources.mosaic", "params": {"url": "https://mosaic.example.com/", "password_env": "HOME"}}}
    assert refused(service, mosaic, "env_not_allowed").param == "steps.m.params.password_env"


def test_an_allowed_variable_that_is_not_set_is_refused_naming_the_step_not_run(service, monkeypatch):
    """Accepted, the task would fail at its reranker, after the retrieval in front of it."""
    monkeypatch.setenv("TESSERA_ALLOW_ENV", "COHERE_API_KEY")
    monkeypatch.delenv("COHERE_API_KEY", raising=False)
    steps = {"bm25": {"op": "retrieve.bm25", "params": {"k": 3}},
             "r": {**RERANK, "params": {**RERANK["params"], "api_key_env": "COHERE_API_KEY"}}}
    error = refused(service, steps, "env_not_set")
    assert error.param == "steps.r.params.api_key_env"
    assert "$COHERE_API_KEY (step r, params.api_key_env), not set where this service runs" in error.message
    monkeypatch.setenv("COHERE_API_KEY", "")  # empty is unset
    assert refused(service, steps, "env_not_set").param == "steps.r.params.api_key_env"
    monkeypatch.setenv("COHERE_API_KEY", "k-secret-123")
    prepared(service, steps)
    # a language model alias's key: the variable is the service's (models.yaml), not the request's to name
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    answer = {"bm25": {"op": "retrieve.bm25", "params": {"k": 3}}, "context": {"op": "generate.context"},
              "answer": {"op": "generate.answer", "params": {"model": "DeepSeekv3"}}}
    error = refused(service, answer, "env_not_set")
    assert error.param == "steps.answer.params.model" and "$DEEPSEEK_API_KEY (step answer" in error.message


@pytest.mark.parametrize("model", ["ollama_chat/phi3", "openai/gpt-4o-mini", "tessera//etc/passwd.gguf",
                                   "hosted_vllm/x"])
def test_a_language_model_only_by_alias(service, model):
    steps = {"bm25": {"op": "retrieve.bm25", "params": {"k": 3}}, "context": {"op": "generate.context"},
             "answer": {"op": "generate.answer", "params": {"model": model}}}
    error = refused(service, steps, "model_not_allowed")
    assert error.param == "steps.answer.params.model" and "by alias only" in error.message and "gemma2" in error.message
    tokenizer = {**steps, "context": {"op": "generate.context", "params": {"model": model}},
                 "answer": {"op": "generate.answer"}}
    assert refused(service, tokenizer, "model_not_allowed").param == "steps.context.params.model"
    hops = {"hops": {"op": "retrieve.multi_hop", "params": {"follow_up": "llm", "follow_up_model": model}}}
    assert refused(service, hops, "model_not_allowed").param == "steps.hops.params.follow_up_model"


def test_aliases_and_the_packaged_embedded_model_are_served(service, monkeypatch, llm_fault_server):
    monkeypatch.setenv("DEEPSEEK_API_KEY", "k-123")  # DeepSeekv3's key (unset: env_not_set)
    monkeypatch.setenv("OLLAMA_API_BASE", llm_fault_server.base)  # gemma2's server answers (else model_unreachable)
    for model in ("local", "gemma2", "DeepSeekv3", "tessera/smollm2-135m-instruct"):
        prepared(service, {"bm25": {"op": "retrieve.bm25", "params": {"k": 3}}, "context": {"op": "generate.context"},
                           "answer": {"op": "generate.answer", "params": {"model": model}}})


def test_a_model_on_an_ollama_server_that_does_not_answer_is_the_services_503_not_the_flows(service, monkeypatch):
    """Accepted, each query's answer failed after the retrieval and its retries, degraded. The server's state, not
    the flow's: ``GET /flows`` still lists a flow naming that model as runnable (its status is kept per version of
    the flow's file, and would stay so after the server came up)."""
    from flows import store as flow_store
    from flows.spec import FlowSpec
    from operators.llm.testing import closed_port
    from serve.runs.flow_resolution import flow_owner
    from serve.runs.flow_status import flow_problem, versions

    monkeypatch.setenv("OLLAMA_API_BASE", f"http://127.0.0.1:{closed_port()}")
    steps = {"bm25": {"op": "retrieve.bm25", "params": {"k": 3}}, "context": {"op": "generate.context"},
             "answer": {"op": "generate.answer", "params": {"model": "gemma2"}}}
    with pytest.raises(ApiError) as err:
        service.prepare({"flow": {"steps": steps}, "query": "honey"}, "local")
    assert (err.value.status, err.value.code, err.value.kind) == (503, "model_unreachable", "server_error")
    assert err.value.param == "steps.answer.params.model"  # the field, as a 422 names it (the web UI says it)
    assert "model 'gemma2' cannot be reached: no Ollama server answers on http://127.0.0.1:" in err.value.message
    flow_store.save("ollama_rag", FlowSpec.parse({"steps": {**steps, "bm25": {
        "op": "retrieve.bm25", "params": {"k": 3, "index": "news"}}}}), owner=flow_owner("local"))
    assert flow_problem("ollama_rag", "local", versions()) is None


def test_a_model_on_an_api_base_server_that_does_not_answer_is_a_503_naming_its_param(service, monkeypatch, tmp_path):
    """An alias naming a vLLM, llama.cpp or Tessera server by api_base was accepted with that server down: each
    query's answer failed after the retrieval and its retries, degraded. Now the same 503 as for Ollama; once the
    server answers (any status: 404 here), the request is prepared at once, and the next one does not ask it again."""
    from operators.llm.testing import CountingServer, closed_port

    port = closed_port()
    models = tmp_path / "models.yaml"
    models.write_text(f"gpu: {{model: hosted_vllm/q, api_base: 'http://127.0.0.1:{port}/v1'}}\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    steps = {"bm25": {"op": "retrieve.bm25", "params": {"k": 3}}, "context": {"op": "generate.context"},
             "answer": {"op": "generate.answer", "params": {"model": "gpu"}}}
    with pytest.raises(ApiError) as err:
        service.prepare({"flow": {"steps": steps}, "query": "honey"}, "local")
    assert (err.value.status, err.value.code, err.value.kind) == (503, "model_unreachable", "server_error")
    assert err.value.param == "steps.answer.params.model"
    assert err.value.message == (
        "the flow was not run: step 'answer', field 'steps.answer.params.model': model 'gpu' cannot be reached: no "
        f"server answers on http://127.0.0.1:{port}/v1 (ConnectionError); start it, or change the alias's api_base in "
        "its models file; or give the step another model (tessera models says which answer)")
    with CountingServer(port, status=404) as server:
        for _ in range(3):
            prepared(service, steps)
        assert server.asked == {"/v1": 1}


def test_a_model_path_only_inside_the_model_repository(service, tmp_path):
    bm25 = {"op": "retrieve.bm25", "params": {"k": 3}}
    for path in ("/root", "/etc", str(tmp_path), "./anywhere", "~"):
        error = refused(service, {"bm25": bm25, "r": {"op": "rerank.embedding", "params": {"model": path}}},
                        "model_not_allowed")
        assert error.param == "steps.r.params.model" and "is a path" in error.message
    trained = tmp_path / "home" / "models" / "mine"
    trained.mkdir(parents=True)
    prepared(service, {"bm25": bm25, "r": {"op": "rerank.embedding", "params": {"model": str(trained)}}})
    prepared(service, {"bm25": bm25, "r": {"op": "rerank.embedding", "params": {"model": "all-MiniLM-L6-v2"}}})


@pytest.mark.parametrize("post, field, code", [
    ({**RERANK, "params": {**RERANK["params"], "api_key_env": "TESSERA_API_KEYS"}}, "api_key_env", "env_not_allowed"),
    ({"op": "rerank.cross_encoder", "params": {"model": "/etc"}}, "model", "model_not_allowed"),
], ids=["env", "model-path"])
def test_a_step_inside_multi_collection_is_guarded_as_a_step(service, post, field, code):
    """retrieve.multi_collection runs its postprocessors itself: one could name the service's keys, sent to its own
    URL, or load a folder from anywhere, since only the outer step's params were looked at."""
    steps = {"m": {"op": "retrieve.multi_collection", "params": {"collections": [{"name": "a", "index": "news"}],
                                                                 "postprocess": [post]}}}
    assert refused(service, steps, code).param == f"steps.m.params.postprocess.0.params.{field}"


@pytest.mark.parametrize("exists, missing", [("serve/../../../etc/passwd", "serve/../../../etc/no-such-file"),
                                             ("serve/flow_status.gguf", "data/x.safetensors"),
                                             ("serve/__pycache__/x", "serve/no-such-dir/x"),
                                             ("/etc/passwd", "/etc/no-such-file")])
def test_a_model_path_gets_one_answer_whether_or_not_it_exists(service, exists, missing):
    """Deciding "a path" by whether one exists told a client which files the server has (a 422 for one that does, a
    404 naming the resolved path and the working directory for one that does not): decided by the text alone."""
    import os

    bm25 = {"op": "retrieve.bm25", "params": {"k": 3}}
    answers = []
    for path in (exists, missing):
        error = refused(service, {"bm25": bm25, "r": {"op": "rerank.cross_encoder", "params": {"model": path}}},
                        "model_not_allowed")
        assert error.param == "steps.r.params.model" and os.getcwd() not in error.message
        answers.append(error.message.replace(path, "<path>"))
    assert answers[0] == answers[1]


@pytest.mark.parametrize("model", ["all-MiniLM-L6-v2", "all-mpnet-base-v2", "minilm",
                                   "sentence-transformers/all-MiniLM-L6-v2", "BAAI/bge-reranker-base", "mine"])
def test_model_names_and_hub_ids_are_not_paths(service, tmp_path, model):
    (tmp_path / "home" / "models" / "mine").mkdir(parents=True)
    prepared(service, {"bm25": {"op": "retrieve.bm25", "params": {"k": 3}},
                       "r": {"op": "rerank.cross_encoder", "params": {"model": model}}})


def test_an_embedded_gguf_path_gets_one_answer_whether_or_not_it_exists(service, tmp_path):
    there = tmp_path / "there.gguf"
    there.write_bytes(b"GGUF")
    answers = []
    for path in (there, tmp_path / "missing.gguf"):
        steps = {"bm25": {"op": "retrieve.bm25", "params": {"k": 3}}, "context": {"op": "generate.context"},
                 "answer": {"op": "generate.answer", "params": {"model": f"tessera/{path}"}}}
        answers.append(refused(service, steps, "model_not_allowed").message.replace(str(path), "<path>"))
    assert answers[0] == answers[1]


def test_text_a_spec_cannot_hold_is_refused_naming_where(service):
    for body, field in (({"flow": {"steps": {"\ud83d": {"op": "retrieve.bm25"}}}, "query": "q"}, "flow.steps.\ud83d"),
                        ({"flow": "bm25", "query": "q", "index": "news\ud83d"}, "index"),
                        ({"flow": {"description": "x\ud800", "steps": {"b": {"op": "retrieve.bm25"}}}, "query": "q"},
                         "flow.description")):
        with pytest.raises(SpecError) as err:
            service.prepare(body, "local", search=True)
        assert err.value.field == field and "lone surrogate" in err.value.message
    from flows.spec import FlowSpec

    with pytest.raises(SpecError) as err:  # what PUT /flows/{name} saves: refused before it is written
        FlowSpec.parse({"steps": {"b": {"op": "retrieve.bm25", "params": {"k": 3}}}, "description": "\udc00"})
    assert err.value.field == "description"


def test_an_index_folder_that_holds_no_index_is_named_before_anything_runs(service, tmp_path):
    (tmp_path / "home" / "indices" / "empty").mkdir()
    for index in ("empty", str(tmp_path / "home" / "indices")):
        with pytest.raises(SpecError) as err:
            service.prepare({"flow": "bm25", "query": "q", "index": index}, "local", search=True)
        assert err.value.field == "index" and "no manifest.json" in err.value.message


def test_a_gold_split_is_a_name_not_a_path():
    from operators.errors import ParamsError
    from operators.registry import create

    assert create("retrieve.gold", {"split": "dev"}, step_id="g").params.split == "dev"
    for split in ("../../x", "a/b", ".hidden", ""):
        with pytest.raises(ParamsError):
            create("retrieve.gold", {"split": split}, step_id="g")


def test_a_hub_id_found_nowhere_names_no_folder_of_the_server():
    """The 404 for an ``org/name`` id in neither the cache nor the working directory named the absolute folder it
    looked for, which told a client the service's working directory."""
    import os

    from operators.models.references import ModelNotFoundError, resolve_model_path

    with pytest.raises(ModelNotFoundError) as missing:
        resolve_model_path("no-such-org/no-such-model")
    assert "no-such-org/no-such-model" in missing.value.message and os.getcwd() not in missing.value.message
