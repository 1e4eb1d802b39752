"""The web UI's fixtures: a Serve app of the service alone (no model deployments: the flows run in its replica)
behind an API key, and a headless Chromium driven by Selenium. The app is shut down after the package
(this folder has an ``__init__.py`` for that), before or after tests/serve's own."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
from dataclasses import dataclass

import pytest
import requests


@dataclass(frozen=True)
class Service:
    url: str
    key: str  # the app's one key: every test types it into the page (or shows what happens without it)
    store_url: str  # its task store (SQLite), for a test that needs more tasks than it could run in its time
    other_key: str = ""  # a second key of the app, another tenant: whose index the page's key may not search

    def api(self, method: str, path: str, body=None) -> requests.Response:
        """The same request the page makes, sent straight to the API with the key."""
        return requests.request(method, self.url + path, json=body, headers={"Authorization": f"Bearer {self.key}"},
                                timeout=180)


#: The app's upload limits (the others are the defaults): an upload of 9 documents, or of 100 kB of files, is sent
#: in parts.
UPLOAD_LIMITS = {"max_documents_per_request": 8, "max_upload_bytes": 100_000}


@pytest.fixture(scope="package")
def ui_home(tmp_path_factory):
    """The app's $TESSERA_HOME: the indices the page makes, out of the checkout and new each run (the same as
    tests/serve's ``tessera_home``: a package fixture defined in tests/conftest.py would last the whole session)."""
    home = tmp_path_factory.mktemp("ui-home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TESSERA_HOME", str(home))
        yield home


@pytest.fixture(scope="package")
def ui_app(ray_session, sample_index, ui_home, tmp_path_factory):
    """The service on 127.0.0.1:<free port>, app ``ui`` at ``/tessera``, with one key and MiniLM served."""
    from ray import serve

    from serve.app import build_app
    from serve.service_settings import key_hash

    with socket.socket() as sock:  # a free port on loopback
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    quiet = {"log_level": "WARNING"}
    store = tmp_path_factory.mktemp("ui") / "tasks.db"
    key, other = "ui-" + secrets.token_hex(16), "ui-other-" + secrets.token_hex(16)
    # MiniLM served: searches embed their queries on it and uploads their documents (no model loads per task).
    minilm = {"name": "all-MiniLM-L6-v2", "op": "embed.sentence_transformer", "params": {"model": "all-MiniLM-L6-v2"},
              "num_cpus": 0.5, "num_gpus": 0, "batching": {"max_batch_size": 8, "batch_wait_timeout_s": 0.05}}
    args = {"models": [minilm], "service": {"default_index": str(sample_index), "task_store": f"sqlite:///{store}",
                                            "api_keys": [{"id": "ui", "sha256": key_hash(key)},
                                                         {"id": "ui-other", "sha256": key_hash(other)}],
                                            "limits": UPLOAD_LIMITS}}
    serve.start(http_options={"host": "127.0.0.1", "port": port}, logging_config=quiet)
    try:
        # Below a route prefix, as behind a proxy that serves several apps: the page must find its way there.
        serve.run(build_app(args), name="ui", route_prefix="/tessera", logging_config=quiet)
        yield Service(f"http://127.0.0.1:{port}/tessera", key, f"sqlite:///{store}", other)
    finally:
        serve.shutdown()


def _browser_paths() -> tuple[str, str] | None:
    binary = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    driver = shutil.which("chromedriver")
    return (binary, driver) if binary and driver else None


@pytest.fixture(scope="package")
def browser(tmp_path_factory):
    """Headless Chromium (Debian's ``chromium`` and ``chromium-driver``), one for the package."""
    paths = _browser_paths()
    if paths is None:
        pytest.skip("no chromium and chromedriver on PATH (apt-get install chromium chromium-driver; .ci/run does)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = paths[0]
    # No GPU process, and none of Chromium's own traffic (component updates, sync, translation, ...): this machine's
    # network refuses it, many connections at a time. The page's tests then cost Chromium 62-71 CPU-seconds against
    # 78 (tests/ui alone, benchmarks/suite_cpu.py, 2 cores, 2026-12-02).
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000",
                     "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                     "--disable-sync", "--no-first-run", "--disable-extensions", "--disable-default-apps",
                     "--disable-features=Translate,OptimizationHints,MediaRouter"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, read by driver.get_log("browser")
    # Chromium's profile and its singleton socket's folder (org.chromium.Chromium.*) go under the run's temporary
    # folder, which pytest removes: in /tmp they stayed, a folder for each run (114 on this machine in a day).
    scratch = {**os.environ, "TMPDIR": str(tmp_path_factory.mktemp("chromium"))}
    driver = webdriver.Chrome(service=Service(paths[1], env=scratch), options=options)
    try:
        yield driver
    finally:
        driver.quit()
