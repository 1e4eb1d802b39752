"""``tessera serve`` refuses a Tessera application's invalid ``args`` before Ray starts, in one line naming the field
(``serve.check_args``, run in a child process); before, Ray and Serve started and the app ended DEPLOY_FAILED. A valid
config and the first invalid one go through the real child process; the other cases run the check in this process
(``app_args_in_process``: the same check without a second of imports each)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flows.commands import main
from flows.commands import serve as serve_command


def _config(tmp_path, **service) -> str:
    config = {"http_options": {"host": "127.0.0.1", "port": 8123},
              "applications": [{"name": "mine", "route_prefix": "/", "import_path": "serve.app:build_app",
                                "args": {"models": [], "service": {"default_index": None, **service}}}]}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


@pytest.mark.parametrize("service, field, words", [
    ({"spare_task_workers": 2, "max_idle_task_workers": 1}, "args.service.max_idle_task_workers",
     "1 is below spare_task_workers (2)"),
    ({"idle_task_worker_retire_s": 0}, "args.service.idle_task_worker_retire_s", "greater than 0"),
    ({"no_such_setting": 1}, "args.service.no_such_setting", "unknown field"),
    # a security setting is a YAML boolean only: pydantic's lax mode read the text "yes" as true (an admin key)
    ({"api_keys": [{"id": "ops", "sha256": "a" * 64, "admin": "yes"}]}, "args.service.api_keys.0.admin",
     "must be true or false (got 'yes'); a setting takes YAML's own true or false: write it without quotes "
     "(key 'ops')"),
])
@pytest.mark.process
def test_invalid_args_are_refused_before_ray_starts_naming_the_field(tmp_path, monkeypatch, capsys, request, service,
                                                                    field, words):
    if field != "args.service.max_idle_task_workers":  # the first case is refused by the child process
        request.getfixturevalue("app_args_in_process")
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(serve_command, "run_serve", lambda command, env, **_: pytest.fail("Serve started"))
    status = main(["serve", "--config", _config(tmp_path, **service), "--address", "local"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.startswith(f"tessera: error: field '{field}': {tmp_path / 'config.yaml'}: ") and words in err
    assert "(application 'mine')" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "home" / "serve").exists()  # refused before the config it runs was written


@pytest.mark.process
def test_valid_args_pass_the_check(tmp_path):
    config = yaml.safe_load(Path(_config(tmp_path, spare_task_workers=2, max_idle_task_workers=4)).read_text())
    serve_command.check_app_args(config)  # no error: the child process found nothing
