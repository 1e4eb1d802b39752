"""A saved flow may not take the name of a model the service serves (an id or alias of ``GET /v1/models``): a chat
with that name reaches the model, so ``PUT /flows/local`` made a flow that /v1/models listed as ready (beside the
model of the same id) and that no chat could reach. One saved under such a name before is left out of the chat
models' listing. The service's HTTP API on localhost and its real flow store, without Ray."""

from __future__ import annotations

import requests

from tests.serve.conftest import api_on_localhost

MODELS = ("smollm2", "local", "all-MiniLM-L6-v2")


def test_a_flow_is_not_saved_under_a_served_models_name(tmp_path, monkeypatch):
    from flows import store as flow_store
    from flows.spec import FlowSpec
    from serve.chat import chat_flows
    from serve.runs.flow_resolution import flow_owner
    from serve.service import Service
    from serve.service_settings import ServiceArgs, resolve

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    (tmp_path / "home" / "indices" / "news").mkdir(parents=True)
    (tmp_path / "home" / "indices" / "news" / "manifest.json").write_text("{}")
    args = ServiceArgs(default_index=str(tmp_path / "home" / "indices" / "news"),
                       task_store=f"sqlite:///{tmp_path / 'tasks.db'}")
    Service(resolve(args, environ={}), [], "tessera", model_names=MODELS)
    rag = FlowSpec.load("rag").to_dict()
    rag.pop("name")
    with api_on_localhost() as base:
        for name in MODELS:
            refused = requests.put(f"{base}/flows/{name}", json=rag, timeout=60)
            assert refused.status_code == 422, refused.text
            error = refused.json()["error"]
            assert error["param"] == "name" and "a model this service serves" in error["message"], error
        saved = requests.put(f"{base}/flows/my_rag", json=rag, timeout=60)
        assert saved.status_code == 201, saved.text
    flow_store.save("local", FlowSpec.load("rag"), owner=flow_owner("local"))  # as an older release let it
    listed = [card.id for card in chat_flows.flow_cards("local")]
    assert "my_rag" in listed and "rag" in listed and "local" not in listed
