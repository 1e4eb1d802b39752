"""The health badge while the service is not ready: "starting" naming the models still loading, read again until
they have loaded (then "ready"), and "not ready" naming a check that failed, which no wait mends, rather than
"starting"."""

from __future__ import annotations

import pytest
import requests

from tests.serve.test_readiness import first_answer
from tests.ui.browser import by_id, open_page, wait

pytestmark = [pytest.mark.ray, pytest.mark.integration]


def badge(driver) -> tuple[str, str, str]:
    element = by_id(driver, "health")
    return element.text, element.get_attribute("class"), element.get_attribute("title")


@pytest.mark.slow  # a second app, whose model loads once it may
def test_the_badge_says_starting_naming_the_model_still_loading_then_ready_once_it_has(browser, ui_app):
    from ray import serve

    from serve.app import build_app

    # Its model asks for a GPU this machine lacks (a cluster whose GPU group is at zero), so it loads only once it is
    # given the CPU; no flow routes, no keys: the badge reads /healthz alone.
    model = {"name": "late-minilm", "op": "embed.sentence_transformer", "params": {"model": "all-MiniLM-L6-v2"},
             "num_cpus": 0, "num_gpus": 1}
    args = {"api_deployment": "warming-api", "models": [model], "service": None}
    base = ui_app.url.removesuffix("/tessera") + "/warming"
    serve._run(build_app(args), name="warming", route_prefix="/warming", _blocking=False)  # run() waits for RUNNING
    try:
        assert first_answer(base + "/healthz").status_code == 503
        browser.get(base + "/ui/")
        assert wait(browser, lambda d: badge(d)[0] == "starting: late-minilm")
        text, kind, title = badge(browser)
        assert kind == "badge wait" and title.startswith("not ready: model 'late-minilm' is loading")

        serve._run(build_app({**args, "models": [{**model, "num_gpus": 0}]}), name="warming", route_prefix="/warming",
                   _blocking=False)  # the same model on the CPU: it loads, and the page sees it without a reload
        assert wait(browser, lambda d: badge(d)[:2] == ("ready", "badge ok"), seconds=240)
        assert requests.get(base + "/healthz", timeout=30).json()["models"] == {"late-minilm": "ready"}
    finally:  # not waiting for its replicas' graceful shutdown: nothing else uses this app's names
        serve.delete("warming", _blocking=False)


def test_a_failed_check_is_not_ready_naming_it_and_the_badge_turns_ready_once_it_passes(browser, ui_app, ui_home):
    indices = ui_home / "indices"  # where uploads make indices: a file there fails the tessera_home check
    away = ui_home / "indices.away"
    made = indices.exists()
    if made:
        indices.rename(away)
    indices.write_text("not a folder")
    try:
        open_page(browser, ui_app)
        assert wait(browser, lambda d: badge(d)[0] == "not ready: tessera_home")
        text, kind, title = badge(browser)
        said = requests.get(ui_app.url + "/healthz", timeout=30).json()["error"]["message"]  # no server path in it
        assert said.startswith("not ready: tessera_home: ") and said.endswith("indices is not a folder")
        assert kind == "badge bad" and title == said
    finally:
        indices.unlink()
        if made:
            away.rename(indices)
    assert wait(browser, lambda d: badge(d)[:2] == ("ready", "badge ok"), seconds=30)  # read again until it passes


def test_a_ready_badge_is_read_again_when_the_page_comes_back_into_view(browser, ui_app, ui_home):
    """Once "ready", the badge was never read again until a request failed: a page left open said "ready" of a
    service that had since lost its home. Now it is read every half minute in view and at once when shown again."""
    open_page(browser, ui_app)
    assert wait(browser, lambda d: badge(d)[:2] == ("ready", "badge ok"), seconds=30)
    indices, away = ui_home / "indices", ui_home / "indices.away"
    made = indices.exists()
    if made:
        indices.rename(away)
    indices.write_text("not a folder")
    try:
        shown_again = "document.dispatchEvent(new Event('visibilitychange'))"  # the tab chosen again: visible
        browser.execute_script(shown_again)
        assert wait(browser, lambda d: badge(d)[0] == "not ready: tessera_home", seconds=10)  # not the 30 s read
    finally:
        indices.unlink()
        if made:
            away.rename(indices)
    assert wait(browser, lambda d: badge(d)[:2] == ("ready", "badge ok"), seconds=30)  # the few seconds' read
