"""No API key may have the id ``local``: that is the tenant of every request to a service without keys, so a key
``local`` was that caller, with the tasks and indices made without a key and the command line's shared saved flows
($TESSERA_HOME/flows). Refused where keys are loaded: a serve config's ``api_keys`` (the app's builder, naming the
field) and the ingress's key check; ``tessera keys new --id local`` is refused in tests/flows/test_keys_command.py.
The service's FastAPI app under uvicorn on 127.0.0.1 (no Ray)."""

from __future__ import annotations

import pytest
import requests

from operators.api_keys import key_hash
from tests.serve.conftest import api_on_localhost, finished_search

KEY = "tessera_" + "k" * 40


def test_a_config_key_with_the_id_local_stops_the_build_naming_the_field(tmp_path, monkeypatch):
    from serve.app import build_app
    from serve.settings import ServeConfigError

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    monkeypatch.delenv("TESSERA_API_KEYS", raising=False)
    service = {"default_index": None, "task_store": f"sqlite:///{tmp_path / 'tasks.db'}",
               "api_keys": [{"id": "alice", "sha256": key_hash("a" + KEY)}, {"id": "local", "sha256": key_hash(KEY)}]}
    with pytest.raises(ServeConfigError) as err:
        build_app({"models": [], "service": service})
    assert err.value.field == "service.api_keys.1.id", err.value.field
    assert "key id 'local' is reserved" in str(err.value) and "another id" in str(err.value)
    service["api_keys"][1]["id"] = "local2"  # any other id is taken
    assert build_app({"models": [], "service": service}) is not None


def test_the_service_lets_no_key_in_as_the_keyless_caller(make_service):
    """The hole: a key ``local`` read the tasks of the service's keyless caller (and its indices and flows)."""
    keyless = finished_search(make_service())
    with pytest.raises(ValueError, match="key id 'local' is reserved"):
        with api_on_localhost(keys={key_hash(KEY): "local"}) as url:  # the ingress's own key check
            requests.get(f"{url}/task/progress/{keyless}", headers={"Authorization": f"Bearer {KEY}"}, timeout=30)
    with api_on_localhost() as url:  # nothing of it stayed: no keys, the caller is the keyless one again
        assert requests.get(f"{url}/task/progress/{keyless}", timeout=30).status_code == 200
    with api_on_localhost(keys={key_hash(KEY): "alice"}) as url:  # a key of another id does not see the task
        answer = requests.get(f"{url}/task/progress/{keyless}", headers={"Authorization": f"Bearer {KEY}"},
                              timeout=30)
        assert answer.status_code == 404, answer.text
