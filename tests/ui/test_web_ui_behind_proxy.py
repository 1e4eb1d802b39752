"""The web UI behind a real nginx that serves the service under ``/tessera/`` (docs/serving.md, "Behind a reverse
proxy"): the service's FastAPI app under uvicorn with that ``root_path`` (no Ray), nginx with the documented
``location`` block, headless Chromium. Skipped where nginx or Chromium is not installed.

An upload over nginx's ``client_max_body_size`` (1 MB unless the operator sets it) is refused by nginx itself with
its own HTML page: the page said "HTTP 413: 413 Request Entity Too Large", which told the user neither who refused
it nor what to do; it says that the proxy in front refused it as too large and what the operator raises."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from tests.serve.conftest import api_on_localhost, make_service  # noqa: F401 (a fixture)
from tests.serve.nginx_proxy import documented_location, nginx_in_front
from tests.ui.browser import by_id, error_text, set_text, wait
from tests.ui.test_web_ui_upload import choose, text_of

pytestmark = [pytest.mark.slow, pytest.mark.process]  # nginx and Chromium


def test_the_page_under_a_prefix_stays_in_it_and_says_that_the_proxy_refused_a_large_upload(
        browser, make_service, tmp_path):  # noqa: F811 (the fixture imported above)
    make_service()
    location = documented_location().replace("client_max_body_size 25m", "client_max_body_size 1m")
    big = tmp_path / "big.txt"
    big.write_text(text_of(1_500_000, "bees"))  # under the service's max_upload_bytes (20 MB), over nginx's 1 MB
    with api_on_localhost(root_path="/tessera") as base, nginx_in_front(base, tmp_path, location) as proxied:
        browser.execute_script("try { window.sessionStorage.clear(); } catch (err) {}")
        browser.get(proxied + "/")
        wait(browser, lambda d: d.current_url == proxied + "/ui/")  # the 307 keeps the prefix
        browser.find_element(By.CSS_SELECTOR, 'nav button[data-tab="indices"]').click()
        wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#upload-spec option"))  # listing and flows read
        # every file and call of the page went through the proxy, under the prefix
        fetched = browser.execute_script("return performance.getEntriesByType('resource').map((e) => e.name)")
        assert fetched and all(url.startswith(proxied + "/") for url in fetched), fetched

        set_text(browser, "upload-index", "handbook")
        choose(browser, big)
        by_id(browser, "upload-button").click()
        shown = wait(browser, lambda d: error_text(d))
    assert shown.startswith("HTTP 413"), shown
    assert "the proxy in front of the service refused it as too large" in shown, shown
    assert "client_max_body_size" in shown and "<" not in shown, shown
