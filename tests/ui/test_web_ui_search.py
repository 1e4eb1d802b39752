"""The Search tab against a real service: hits in the API's order, the service's text shown as text, a refusal
naming its field, a flow that builds an index kept out, and answers with their sources, cut short or summarised;
each compared with the same request sent straight to the API."""

from __future__ import annotations

import re

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from tests.ui.browser import (QUERY, by_id, error_text, fill_search, flow_names, open_page, rag_cut_short,
                              shown_results, wait)

pytestmark = [pytest.mark.ray, pytest.mark.integration]


def flat(text: str) -> str:
    """Text as the page renders it: runs of spaces and line breaks one space."""
    return " ".join(text.split())


def shown_hits(driver) -> list[list[dict[str, str]]]:
    """Per query article, each hit's row as the page renders it: its text by column (the cells' data-column)."""
    rows = driver.execute_script("""return [...document.querySelectorAll('#results article.result')].map((article) =>
        [...article.querySelectorAll('table.hits tbody tr')].map((row) => Object.fromEntries(
            [...row.cells].map((cell) => [cell.dataset.column, cell.innerText]))));""")
    return [[{column: flat(text) for column, text in row.items()} for row in article] for article in rows]


def hit_row(hit: dict) -> dict[str, str]:
    """A hit of the API as its row should read (docs/serving.md, Search: rank, docno, title, score, text)."""
    text = hit["text"] if len(hit["text"]) <= 280 else hit["text"][:280] + "… more"
    rank = hit["rank"]  # as JavaScript writes a number: 3.0 arrives as 3
    return {"rank": str(int(rank)) if float(rank).is_integer() else str(rank), "docno": hit["docno"],
            "title": flat(hit.get("title") or ""), "score": f"{hit['score']:.4f}", "text": flat(text)}


def test_search_shows_the_services_hits_in_its_order(browser, ui_app):
    open_page(browser, ui_app)
    queries = [QUERY, "gothic cathedrals"]
    fill_search(browser, "bm25", "\n".join(queries), "4")
    by_id(browser, "search-button").click()
    wait(browser, lambda d: len(shown_results(d)) == 2)

    expected = ui_app.api("POST", "/v1/search", {"flow": "bm25", "queries": queries, "top_k": 4}).json()
    assert shown_results(browser) == [(r["query"], [h["docno"] for h in r["hits"]]) for r in expected["results"]]
    assert all(len(docnos) == 4 for _, docnos in shown_results(browser))
    # every column of every hit, not only its docno: rank, title, score to 4 places, the text (cut at 280 with "more")
    assert shown_hits(browser) == [[hit_row(h) for h in r["hits"]] for r in expected["results"]]
    assert any(len(h["text"]) > 280 for r in expected["results"] for h in r["hits"])  # a cut text among them
    assert by_id(browser, "search-status").text.startswith("bm25: 2 queries in ")
    spec = ui_app.api("GET", "/flows/bm25").json()
    description = by_id(browser, "flow-description")  # its `backticks` as <code>, built as elements
    assert description.text == f"{spec['description'].replace('`', '')} Steps: bm25 (retrieve.bm25)"
    assert [c.text for c in description.find_elements(By.TAG_NAME, "code")] == re.findall(r"`([^`]+)`",
                                                                                          spec["description"])


def test_text_from_the_service_is_shown_as_text_never_as_html(browser, ui_app):
    open_page(browser, ui_app)
    query = '<img src=x onerror="document.title=1"><b>gothic</b> cathedrals'
    fill_search(browser, "bm25", query, "2")
    by_id(browser, "search-button").click()
    wait(browser, lambda d: len(shown_results(d)) == 1)
    assert ui_app.api("POST", "/v1/search", {"flow": "bm25", "query": query, "top_k": 2}).json()["results"][0][
        "query"] == query  # the service echoes it as sent
    assert shown_results(browser)[0][0] == query
    assert browser.find_elements(By.CSS_SELECTOR, "#results img, #results b") == []
    assert browser.title == "Tessera"


def test_a_refused_request_shows_the_services_message_naming_the_field_keeps_the_form_and_clears_the_last_results(
        browser, ui_app):
    open_page(browser, ui_app)
    fill_search(browser, "bm25", QUERY, "3")
    by_id(browser, "search-button").click()
    wait(browser, lambda d: len(shown_results(d)) == 1)
    fill_search(browser, "bm25", QUERY, "0")  # under the field's minimum: the browser keeps it from being sent
    assert browser.execute_script("return document.getElementById('top-k').checkValidity()") is False
    fill_search(browser, "bm25", QUERY, "1000000")  # over the service's max_result_rows
    by_id(browser, "search-button").click()
    wait(browser, lambda d: error_text(d) != "")

    refused = ui_app.api("POST", "/v1/search", {"flow": "bm25", "query": QUERY, "top_k": 1000000})
    error = refused.json()["error"]
    assert refused.status_code == 422 and error["param"] == "top_k"
    assert error_text(browser) == f"HTTP 422 (field: top_k): {error['message']}"
    assert shown_results(browser) == [] and by_id(browser, "search-status").text == ""  # not the last search's
    assert by_id(browser, "queries").get_attribute("value") == QUERY  # nothing typed is lost
    assert by_id(browser, "search-button").is_enabled()


def searched_answer(browser, ui_app, flow: str, question: str):
    """The answer box the page shows for ``question`` searched with ``flow``, and the API's metadata for it."""
    open_page(browser, ui_app)
    fill_search(browser, flow, question, "5")
    by_id(browser, "search-button").click()
    answer = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#results .answer"), seconds=300)[0]
    metadata = ui_app.api("POST", "/v1/search", {"flow": flow, "query": question, "top_k": 5}).json()["results"][0][
        "metadata"]
    return answer, metadata


@pytest.mark.slow  # the embedded model answers in the replica, after MiniLM's load there
def test_an_answer_and_its_numbered_sources_are_the_apis(browser, ui_app):
    answer, metadata = searched_answer(browser, ui_app, "rag", QUERY)
    assert answer.find_element(By.TAG_NAME, "p").text == f"Answer: {metadata['answer'] or '(no answer)'}"
    sources = [li.text for li in answer.find_elements(By.CSS_SELECTOR, ".sources li")]
    if metadata.get("references"):  # rag's references, numbered as its answer cites them
        assert sources == metadata["references"]
    else:
        assert len(sources) == len(metadata["sources"])
        assert all(s.endswith(f"({docno})") or s == docno for s, docno in zip(sources, metadata["sources"]))


@pytest.mark.slow  # the embedded model answers in the replica
def test_an_answer_written_from_no_documents_shows_no_sources_line_and_no_hits_line(browser, ui_app):
    """answer_only never searches: "no sources cited" and "no hits" under its answer were noise."""
    answer, metadata = searched_answer(browser, ui_app, "answer_only", QUERY)
    assert ui_app.api("POST", "/v1/search", {"flow": "answer_only", "query": QUERY}).json()["results"][0]["hits"] == []
    assert isinstance(metadata["answer"], str) and metadata["sources"] == []
    assert answer.find_element(By.TAG_NAME, "p").text == f"Answer: {metadata['answer'] or '(no answer)'}"
    article = browser.find_element(By.CSS_SELECTOR, "#results article.result")
    lines = [p.text for p in article.find_elements(By.CSS_SELECTOR, "p.status")]  # (a cut answer's line may show)
    assert "no sources cited" not in lines and "no hits" not in lines, lines
    assert not article.find_elements(By.CSS_SELECTOR, "table.hits, .sources")
    assert article.find_element(By.TAG_NAME, "details").text == "metadata"  # the answer's metadata, folded


def test_a_question_the_index_does_not_cover_is_declined_and_says_no_model_wrote_that(browser, ui_app):
    """rag's min_relevance: nothing in the sample is about football, so the answer is the step's no-answer text."""
    answer, metadata = searched_answer(browser, ui_app, "rag", "who won the 2018 football world cup")
    assert metadata["abstained"] is True and "usage" not in metadata
    assert answer.find_element(By.TAG_NAME, "p").text == f"Answer: {metadata['answer']}"
    assert [p.text for p in answer.find_elements(By.CSS_SELECTOR, ".abstained")] == [
        "(no model call: no document found is as close to the question as the answer step's min_relevance asks)"]
    assert not answer.find_elements(By.CSS_SELECTOR, ".cut")


def test_a_flow_that_builds_an_index_cannot_be_searched_and_points_to_the_indices_tab(browser, ui_app):
    assert any(step["op"].startswith("sources.") for step in ui_app.api("GET", "/flows/ingest").json()[
        "steps"].values())
    open_page(browser, ui_app)
    Select(by_id(browser, "flow")).select_by_value("ingest")
    wait(browser, lambda d: not by_id(d, "search-button").is_enabled())
    assert not by_id(browser, "enqueue-button").is_enabled()
    assert by_id(browser, "flow-warning").text == "this flow builds an index from documents: use the Indices tab"
    refused = ui_app.api("POST", "/v1/search", {"flow": "ingest", "query": QUERY})
    assert refused.status_code == 422  # the service would refuse it too
    Select(by_id(browser, "flow")).select_by_value("bm25")
    wait(browser, lambda d: by_id(d, "search-button").is_enabled())
    assert by_id(browser, "enqueue-button").is_enabled() and not by_id(browser, "flow-warning").is_displayed()


@pytest.mark.slow  # the embedded model answers in the replica
def test_an_answer_cut_at_max_tokens_says_so_and_a_summary_shows_as_an_answer_does(browser, ui_app):
    with rag_cut_short(ui_app, "ui_cut_") as name:
        answer, metadata = searched_answer(browser, ui_app, name, QUERY)
        assert metadata["finish_reason"] == "length" and metadata["answer_cut"] is True
        assert [p.text for p in answer.find_elements(By.CSS_SELECTOR, ".cut")] == ["(cut off at the step's max_tokens)"]

        fill_search(browser, "summarize", QUERY, "5")
        by_id(browser, "search-button").click()
        summary = wait(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#results .summary"), seconds=300)[0]
        metadata = ui_app.api("POST", "/v1/search", {"flow": "summarize", "query": QUERY, "top_k": 5}).json()[
            "results"][0]["metadata"]
        assert summary.text == f"Summary: {metadata['summary']}"


def slow_first_search(driver, seconds: float) -> None:
    """The page's searches counted as they are sent (``window.searchesSent``, their bodies), the first one's answer
    handed to the page ``seconds`` late, as a slow flow's is (``window.searchesAnswered`` counts those handed)."""
    driver.execute_script("""window.searchesSent = [];
        window.searchesAnswered = 0;
        const fetchNow = window.fetch;
        window.fetch = async (url, init) => {
          if (!String(url).endsWith("/v1/search")) return fetchNow(url, init);
          window.searchesSent.push(JSON.parse(init.body));
          const first = window.searchesSent.length === 1;
          const response = await fetchNow(url, init);
          if (first) await new Promise((done) => setTimeout(done, arguments[0] * 1000));
          window.searchesAnswered += 1;
          return response;
        };""", seconds)


def test_one_search_runs_at_a_time_and_only_its_answer_is_shown(browser, ui_app):
    """Ctrl+Enter while a slow search ran sent another one (requestSubmit ignores the Search button that is off), and
    the first one's late answer then replaced the second's results; Ctrl+Enter twice sent the same search twice."""
    open_page(browser, ui_app)
    slow_first_search(browser, 3)
    fill_search(browser, "bm25", QUERY, "3")
    by_id(browser, "queries").send_keys(Keys.CONTROL, Keys.ENTER)
    by_id(browser, "queries").send_keys(Keys.CONTROL, Keys.ENTER)  # the same search again
    assert not by_id(browser, "search-button").is_enabled()
    fill_search(browser, "bm25", "gothic cathedrals", "2")  # another search typed while the first runs
    by_id(browser, "queries").send_keys(Keys.CONTROL, Keys.ENTER)
    wait(browser, lambda d: d.execute_script("return window.searchesAnswered") >= 1
         and by_id(d, "search-button").is_enabled())
    assert browser.execute_script("return window.searchesSent") == [{"flow": "bm25", "query": QUERY, "top_k": 3}]
    expected = ui_app.api("POST", "/v1/search", {"flow": "bm25", "query": QUERY, "top_k": 3}).json()["results"][0]
    assert shown_results(browser) == [(QUERY, [h["docno"] for h in expected["hits"]])]
    assert by_id(browser, "search-status").text.startswith("bm25: 1 query in ")

    by_id(browser, "search-button").click()  # the search typed meanwhile, once the first has ended
    wait(browser, lambda d: d.execute_script("return window.searchesAnswered") == 2 and len(shown_results(d)) == 1
         and shown_results(d)[0][0] == "gothic cathedrals")
    assert len(shown_results(browser)[0][1]) == 2


def test_another_key_drops_the_running_search_and_its_late_answer_shows_nothing(browser, ui_app):
    """Search stayed off for the new key until the old key's search ended, whose seconds went on counting in the
    status line meanwhile."""
    open_page(browser, ui_app)
    slow_first_search(browser, 4)
    fill_search(browser, "bm25", QUERY, "3")
    by_id(browser, "search-button").click()
    wait(browser, lambda d: d.execute_script("return window.searchesSent.length") == 1)
    key = by_id(browser, "api-key")
    for typed in ("ui-another-key", ui_app.key):  # another key, then this one again: the page forgets and reads again
        key.clear()
        key.send_keys(typed, Keys.TAB)
    wait(browser, lambda d: "bm25" in flow_names(d))
    assert by_id(browser, "search-button").is_enabled() and by_id(browser, "search-status").text == ""
    fill_search(browser, "bm25", "gothic cathedrals", "2")
    by_id(browser, "search-button").click()
    wait(browser, lambda d: d.execute_script("return window.searchesAnswered") == 2)  # the first one's too
    assert [(query, len(docnos)) for query, docnos in shown_results(browser)] == [("gothic cathedrals", 2)]
    assert by_id(browser, "search-status").text.startswith("bm25: 1 query in ")
    assert by_id(browser, "search-button").is_enabled() and error_text(browser) == ""


def hold_the_flow_list(driver) -> None:
    """The page's ``GET /flows`` held until ``window.releaseFlows()`` (a slow service, or one still reading its
    flows), and the bodies of its searches and tasks counted as they are sent (``window.searchesSent``)."""
    driver.execute_script("""window.searchesSent = [];
        const held = new Promise((release) => { window.releaseFlows = release; });
        const fetchNow = window.fetch;
        window.fetch = async (url, init) => {
          const path = new URL(String(url)).pathname;
          if (path.endsWith("/v1/search") || path.endsWith("/task/enqueue")) {
            window.searchesSent.push(JSON.parse(init.body));
          }
          if (path.endsWith("/flows")) await held;
          return fetchNow(url, init);
        };""")


def test_no_search_goes_without_a_flow_while_the_flow_list_loads_after_the_key(browser, ui_app):
    """Opened without the key (its GET /flows a 401), the key typed, then Search pressed before the list the key's
    change reads again had come: the page sent ``"flow": ""``, and showed the service's 422 listing every flow."""
    browser.get(ui_app.url + "/")
    browser.execute_script("window.localStorage.clear()")
    open_page(browser, ui_app, typed=False)
    wait(browser, lambda d: error_text(d).startswith("HTTP 401"))
    hold_the_flow_list(browser)
    key = by_id(browser, "api-key")
    key.send_keys(ui_app.key, Keys.TAB)  # the change: everything read again with it, the flows held on their way
    wait(browser, lambda d: error_text(d) == "")
    queries = by_id(browser, "queries")
    queries.clear()
    queries.send_keys(QUERY)
    assert flow_names(browser) == []
    assert not by_id(browser, "search-button").is_enabled() and not by_id(browser, "enqueue-button").is_enabled()
    queries.send_keys(Keys.CONTROL, Keys.ENTER)  # the box's own way to search
    browser.execute_script("document.getElementById('search-form').requestSubmit()")  # and a submit all the same
    wait(browser, lambda d: error_text(d) != "")
    assert error_text(browser).startswith("Choose a flow (field: flow): the list of flows has not loaded yet")
    assert browser.switch_to.active_element == by_id(browser, "flow")  # the field it names
    assert browser.execute_script("return window.searchesSent") == []  # nothing sent without a flow

    browser.execute_script("window.releaseFlows()")  # the list comes: Search is on, with a flow
    wait(browser, lambda d: "bm25" in flow_names(d) and by_id(d, "search-button").is_enabled())
    assert by_id(browser, "enqueue-button").is_enabled()
    fill_search(browser, "bm25", QUERY, "2")
    by_id(browser, "search-button").click()
    wait(browser, lambda d: len(shown_results(d)) == 1)
    assert browser.execute_script("return window.searchesSent") == [{"flow": "bm25", "query": QUERY, "top_k": 2}]
    assert error_text(browser) == ""
