"""Bodies the service refuses naming their field, never with a 500: index names longer than a file name can be, a
mosaicRAG step whose ``parameters`` is not an object, a query longer than ``max_query_chars`` (a search's, a task's,
a chat's question), a query of only blanks or control characters (a NUL), a ``top_k`` that is not a JSON integer,
a chat content part that is not text; a search whose index is deleted while it runs is a 404;
a task whose code fails outside its flow's own error handling fails with that error. Real specs, a real BM25
index and a real SQLite task store, through ``Service`` and the routes' functions; nothing runs on Ray."""

from __future__ import annotations

import shutil

import pytest

from operators.errors import SpecError
from serve.http.errors import ApiError
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve
from tests.serve.conftest import run_search, two_document_index

BM25 = {"op": "retrieve.bm25", "params": {"k": 3}}


@pytest.fixture
def service(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("TESSERA_HOME", str(home))
    for name in ("news", "gone"):
        two_document_index(home / "indices" / name)
    args = ServiceArgs(default_index=str(home / "indices" / "news"), task_store=f"sqlite:///{tmp_path / 'tasks.db'}",
                       limits={"max_query_chars": 50})
    return Service(resolve(args, environ={}), [], "tessera")


def refusal(service: Service, body: dict, *, search: bool = True) -> ApiError | SpecError:
    with pytest.raises((ApiError, SpecError)) as err:
        service.prepare(body, "local", search=search)
    return err.value


@pytest.mark.parametrize("index", ["a" * 256, "a" * 5000, "x/" + "é" * 128, "b" * 200 + "/" + "c" * 300])
def test_an_index_name_longer_than_a_file_name_is_a_422_naming_the_field(service, index):
    for body, field in (({"flow": "bm25", "query": "honey", "index": index}, "index"),
                        ({"flow": {"steps": {"bm25": {**BM25, "params": {"k": 3, "index": index}}}}, "query": "honey"},
                         "steps.bm25.params.index")):
        err = refusal(service, body)
        assert (err.status, err.param, err.code) == (422, field, "index_name_too_long"), err.message
        assert "at most 255" in err.message and len(err.message) < 300


def test_an_index_name_of_255_bytes_is_looked_for(service):
    err = refusal(service, {"flow": "bm25", "query": "honey", "index": "a" * 255})
    assert isinstance(err, SpecError) and err.field == "index" and "does not exist" in err.message
    assert "GET /v1/indices lists the indices" in err.message and "make demo" not in err.message  # not the sample


@pytest.mark.parametrize("body, search, field, words", [
    ({"flow": 5, "query": "honey"}, True, "flow",
     "a flow's name (a string) or an inline spec (an object), not a number"),
    ({"flow": "bm25", "query": "honey", "index": ""}, True, "index", "not empty; leave index out"),  # was the default
    ({"flow": "bm25", "query": "honey", "index": " "}, False, "index", "not empty"),
    ({"flow": {"steps": {"b": {"op": "nope.op"}}}, "query": "honey"}, True, "steps.b.op", "unknown operator"),
    ({"query": "honey", "1": {"id": "nope"}}, False, "1.id", "unknown operator 'nope'"),  # as the request wrote it
])
def test_a_refusal_names_the_field_as_the_body_wrote_it(service, body, search, field, words):
    err = refusal(service, body, search=search)
    assert err.field == field and words in err.message, (err.field, err.message)


@pytest.mark.parametrize("top_k", ["3", True, 3.0, "1e1"])
def test_a_top_k_that_is_not_an_integer_is_refused_as_the_model_routes_refuse_one(service, top_k):
    """``top_k: "3"`` was read as 3 and ``true`` as 1, where the model routes refuse a string or a boolean for a
    number (``max_tokens: "3"``): strict alike, a search's and a task's."""
    for search in (True, False):
        err = refusal(service, {"flow": "bm25", "query": "honey", "top_k": top_k}, search=search)
        assert isinstance(err, SpecError) and err.field == "top_k" and "integer" in err.message, err.message
    assert service.prepare({"flow": "bm25", "query": "honey", "top_k": 3}, "local", search=True)


@pytest.mark.parametrize("text", ["\x00", "\x00 \x00", " \t\x1f\n", "\x7f", "\x85\u2028"])
def test_a_query_of_only_nul_blanks_or_controls_is_empty(service, text):
    """``str.strip`` keeps a NUL or another control character, so ``"\\u0000"`` was searched for as a query (the
    documented ``empty_query`` is for a blank one), though it holds nothing to search for."""
    for body, field in (({"flow": "bm25", "query": text}, "query"), ({"flow": "bm25", "queries": ["honey", text]},
                                                                      "queries")):
        for search in (True, False):
            err = refusal(service, body, search=search)
            assert (err.status, err.param, err.code) == (422, field, "empty_query"), err.message
    err = refusal(service, {"query": text, "1": {"id": "bm25"}}, search=False)  # mosaicRAG's body
    assert (err.param, err.code) == ("query", "empty_query")
    for kept in ("\x00honey", "é"):  # a word with a control beside it, one letter
        assert service.prepare({"flow": "bm25", "query": kept}, "local", search=True).queries[0]["query"] == kept


def test_a_chat_question_of_only_controls_is_no_question(service):
    from flows.spec import FlowSpec
    from serve.chat.chat import ChatRequest
    from serve.chat.chat_flows import prepare_flow

    request = ChatRequest(model="rag", messages=[{"role": "user", "content": "\x00\x00"}])
    with pytest.raises(ApiError) as err:
        prepare_flow(FlowSpec.load("rag"), request, "local")
    assert (err.value.status, err.value.param) == (422, "messages") and "no user message with text" in err.value.message


@pytest.mark.parametrize("parameters", ["k=5", ["k"], [["k", "5"]], 5, []])
def test_a_mosaic_step_whose_parameters_is_not_an_object_is_refused_naming_it(service, parameters):
    body = {"query": "honey", "1": {"id": "bm25", "parameters": {"k": 3}}, "2": {"id": "bm25",
                                                                               "parameters": parameters}}
    err = refusal(service, body, search=False)
    assert isinstance(err, SpecError) and err.field == "2.parameters" and "object" in err.message
    err = refusal(service, {"query": "honey", "parameters": parameters, "1": {"id": "bm25"}}, search=False)
    assert isinstance(err, SpecError) and err.field == "parameters"
    service.prepare({"query": "honey", "1": {"id": "bm25", "parameters": None}}, "local")  # none: no parameters


def test_a_query_over_max_query_chars_is_a_422_naming_it(service):
    service.prepare({"flow": "bm25", "query": "b" * 50}, "local", search=True)  # at the limit
    for body, field in (({"flow": "bm25", "query": "b" * 51}, "query"),
                        ({"flow": "bm25", "queries": ["honey", "b" * 51]}, "queries")):
        for search in (True, False):  # a search; a task (enqueue, run)
            err = refusal(service, body, search=search)
            assert (err.status, err.param, err.code) == (422, field, "max_query_chars"), err.message
            assert "51 characters" in err.message
    err = refusal(service, {"query": "b" * 51, "1": {"id": "bm25"}}, search=False)  # mosaicRAG's body
    assert (err.param, err.code) == ("query", "max_query_chars")


def test_a_chat_question_over_max_query_chars_is_a_422_naming_the_messages(service):
    from flows.spec import FlowSpec
    from serve.chat.chat import ChatRequest
    from serve.chat.chat_flows import prepare_flow

    earlier = {"role": "assistant", "content": "c" * 500}  # the conversation is cut by the step that reads it
    request = ChatRequest(model="rag", messages=[{"role": "user", "content": "hi"}, earlier,
                                                 {"role": "user", "content": "q" * 51}])
    with pytest.raises(ApiError) as err:
        prepare_flow(FlowSpec.load("rag"), request, "local")
    assert (err.value.status, err.value.param, err.value.code) == (422, "messages", "max_query_chars")


@pytest.mark.parametrize("model", ["ChatRequest", "CohereChatRequest"])
def test_a_chat_content_part_that_is_not_text_is_a_400_naming_it(model):
    from serve.chat import chat, cohere_chat

    kind = getattr(chat, model, None) or getattr(cohere_chat, model)
    text = {"type": "text", "text": "what is in this picture?"}
    kind.model_validate({"model": "smollm2", "messages": [{"role": "user", "content": [text]}]})
    for part in ({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}, {"type": "input_audio"}):
        with pytest.raises(ApiError) as err:
            kind.model_validate({"model": "smollm2", "messages": [{"role": "system", "content": "be brief"},
                                                                  {"role": "user", "content": [text, part]}]})
        assert (err.value.status, err.value.param) == (400, "messages[1].content[1].type")
        assert f"'{part['type']}'" in err.value.message


def test_a_search_whose_index_is_deleted_while_it_runs_is_a_404_naming_the_index(service, tmp_path):
    from serve.runs.online import run_online

    folder = tmp_path / "home" / "indices"
    assert run_search({"flow": "bm25", "query": "honey", "index": "gone"}, "local")["results"][0]["hits"]
    for name in ("gone", "news"):  # opened by an earlier search (its shards cached in this process), or not yet
        prepared = service.prepare({"flow": "bm25", "query": "honey", "index": name}, "local", search=True)
        (folder / name).rename(folder / f".deleted-{name}")  # what DELETE /v1/indices/{name} does
        shutil.rmtree(folder / f".deleted-{name}")
        with pytest.raises(ApiError) as err:
            run_online(prepared)
        assert (err.value.status, err.value.param, err.value.code) == (404, "index", "index_not_found")
        assert f"index '{name}' that step 'bm25' searches does not exist" in err.value.message


def test_a_task_that_fails_outside_its_flow_fails_with_its_error(service):
    """An upload's job the worker cannot read (a key missing: what a job queued by another version could be) raises
    before ``run_ingest``'s own error handling; the task fails with that error, in one line, and is not left
    running for the actor's exit to be reported as ``interrupted``."""
    from serve.tasks.taskrunner import run_task, run_to_end

    store = service.store
    job = {"ingest": {"index": "news", "source": "/nowhere.jsonl"}, "documents": 1}
    broken, _ = store.create_ingest_task("local", "news", "ingest", job, ["staging", "ingest"], limit=5)
    run_to_end(store, broken, 100)
    task = store.task(broken, "local")
    assert task["status"] == "failed" and task["error"] == "KeyError: 'spec'", task["error"]
    assert task["log"][-1] == "failed: KeyError: 'spec'"
    again, _ = store.create_ingest_task("local", "news", "ingest", job, ["staging", "ingest"], limit=5)
    with pytest.raises(KeyError):  # what the actor's run did with it before: raise, the task left running
        run_task(store, again, 100)
    assert store.task(again, "local")["status"] == "running"


def test_a_finished_tasks_steps_say_their_rows_in_and_out(service):
    """The step table of a finished task holds what the run counted, as ``tessera run`` prints it (rows in was 0)."""
    from serve.tasks.taskrunner import run_task

    bm25 = {**BM25, "params": {**BM25["params"], "index": service.default_index}}
    spec = {"steps": {"bm25": bm25, "top": {"op": "postprocess.reduce", "params": {"k": 2}}}}
    task_id = service.store.create_task("local", "mine", spec, [{"qid": "1", "query": "honey"},
                                                                {"qid": "2", "query": "bees"}], ["bm25", "top"])
    run_task(service.store, task_id, 100)
    task = service.store.task(task_id, "local")
    steps = task["step_progress"]
    assert task["status"] == "finished" and steps["bm25"]["status"] == steps["top"]["status"] == "done", task["error"]
    rows = len(task["result"]["data"])
    assert steps["bm25"]["rows_in"] == 2 and steps["bm25"]["rows_out"] >= rows > 0, steps  # two queries in
    assert (steps["top"]["rows_in"], steps["top"]["rows_out"]) == (steps["bm25"]["rows_out"], rows), steps
