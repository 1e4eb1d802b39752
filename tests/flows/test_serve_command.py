"""``tessera serve`` without starting anything (``--print-config``): overrides, the index resolved where the
command runs, and a public host refused without API keys."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flows.commands import main

CONFIG = str(Path(__file__).resolve().parents[2] / "serve" / "config.yaml")
pytestmark = pytest.mark.usefixtures("app_args_in_process")  # serve.check_args in this process


def test_tessera_serve_refuses_a_public_host_without_keys(monkeypatch, capsys):
    monkeypatch.delenv("TESSERA_API_KEYS", raising=False)
    assert main(["serve", "--config", CONFIG, "--host", "0.0.0.0", "--print-config"]) == 2
    assert "refusing to listen on 0.0.0.0 without API keys" in capsys.readouterr().err
    monkeypatch.setenv("TESSERA_API_KEYS", "some-key-of-24-characters")
    assert main(["serve", "--config", CONFIG, "--host", "0.0.0.0", "--print-config"]) == 0


def test_tessera_serve_resolves_the_index_and_overrides(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["serve", "--config", CONFIG, "--port", "8123", "--print-config"]) == 0
    config = yaml.safe_load(capsys.readouterr().out)
    assert config["http_options"] == {"host": "127.0.0.1", "port": 8123}
    service = config["applications"][0]["args"]["service"]
    assert service["default_index"] == str(tmp_path / ".tessera" / "indices" / "sample")


def test_the_web_ui_address_follows_the_port_and_the_service_apps_route_prefix(tmp_path, monkeypatch, capsys):
    from flows.commands.serve import ui_address

    monkeypatch.chdir(tmp_path)
    assert main(["serve", "--config", CONFIG, "--port", "8123", "--print-config"]) == 0
    config = yaml.safe_load(capsys.readouterr().out)
    assert ui_address(config) == "http://127.0.0.1:8123/ui/"
    config["applications"][0]["route_prefix"] = "/tessera/"
    config["http_options"]["host"] = "0.0.0.0"  # listening everywhere: this machine's browser uses loopback
    assert ui_address(config) == "http://127.0.0.1:8123/tessera/ui/"
