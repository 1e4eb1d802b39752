"""The guarded clients (requests session, httpx sync and async) against a real HTTP server on 127.0.0.1.

The policy allows loopback (the server) and nothing else; names go through an injected resolver, so
``service.test`` reaching the server proves the socket went to the address the guard checked (the system
cannot resolve it). Redirects from the server to forbidden places must fail at that hop.
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import requests

from operators.outbound import (LOOPBACK, OutboundPolicy, OutboundURLError, guard_session, guarded_async_client,
                                guarded_client)
from operators.testing import JsonHandler, local_http_server


class Resolver:
    """A name table whose answers may change between calls (rebinding), counting the lookups."""

    def __init__(self) -> None:
        self.answers = {"service.test": [["127.0.0.1"]], "inward.test": [["10.0.0.5"]],
                        "flip.test": [["127.0.0.1"], ["10.0.0.5"]]}
        self.calls: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        answers = self.answers[host]
        return answers.pop(0) if len(answers) > 1 else answers[0]


class Handler(JsonHandler):
    hits: list[str] = []

    def do_GET(self) -> None:
        Handler.hits.append(self.path)
        parts = urlsplit(self.path)
        if parts.path == "/redirect":
            query = parse_qs(parts.query)
            self.send_response(int(query.get("code", ["302"])[0]))
            self.send_header("Location", query["to"][0])
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.answer_json(200, {"host": self.headers["Host"]})

    do_POST = do_GET


@pytest.fixture(scope="module")
def port():
    with local_http_server(Handler) as url:
        yield urlsplit(url).port


@pytest.fixture
def resolver():
    Handler.hits.clear()
    return Resolver()


@pytest.fixture
def local(resolver):
    return OutboundPolicy(networks=LOOPBACK, resolver=resolver)


def session(policy: OutboundPolicy) -> requests.Session:
    plain = requests.Session()
    plain.trust_env = False  # no proxy from the environment in these tests
    return guard_session(plain, policy)


def redirect(port: int, to: str, code: int = 302) -> str:
    return f"http://127.0.0.1:{port}/redirect?to={to}&code={code}"


FORBIDDEN_HOPS = [
    ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ("http://[::ffff:10.0.0.1]/", "private"),
    ("http://inward.test/", "inward.test resolves to 10.0.0.5"),  # caught at the socket: a name
    ("http://0x7f.1:1/", None),  # loopback is allowed here: the hop is followed (and refused by the port)
]


def test_requests_reach_an_allowed_server(port, local):
    assert session(local).get(f"http://127.0.0.1:{port}/ok", timeout=5).json() == {"host": f"127.0.0.1:{port}"}


def test_requests_refuse_before_connecting(port, resolver):
    with pytest.raises(OutboundURLError, match="loopback"):
        session(OutboundPolicy(resolver=resolver)).get(f"http://127.0.0.1:{port}/ok", timeout=5)
    assert Handler.hits == []


def test_requests_connect_to_the_address_that_was_checked(port, local, resolver):
    answer = session(local).get(f"http://service.test:{port}/ok", timeout=5)
    assert answer.json() == {"host": f"service.test:{port}"}  # the name stays in the Host header
    assert resolver.calls == ["service.test"]  # resolved once, by the guard


def test_requests_recheck_every_new_connection(port, local, resolver):
    assert session(local).get(f"http://flip.test:{port}/ok", timeout=5).status_code == 200
    with pytest.raises(OutboundURLError, match="flip.test resolves to 10.0.0.5"):
        session(local).get(f"http://flip.test:{port}/ok", timeout=5)


@pytest.mark.parametrize("to, reason", FORBIDDEN_HOPS[:3])
@pytest.mark.parametrize("code", [302, 307])
def test_requests_refuse_a_redirect_to_a_forbidden_address(port, local, to, reason, code):
    with pytest.raises(OutboundURLError, match=reason):
        session(local).post(redirect(port, to, code), json={"q": 1}, timeout=5)
    assert len(Handler.hits) == 1


def test_requests_follow_allowed_redirects_and_not_other_schemes(port, local):
    answer = session(local).get(redirect(port, f"http://service.test:{port}/ok"), timeout=5)
    assert answer.json() == {"host": f"service.test:{port}"}
    with pytest.raises(requests.exceptions.InvalidSchema):
        session(local).get(redirect(port, "file:///etc/passwd"), timeout=5)


def test_guard_session_keeps_the_retries_and_pool():
    from operators.rerank._rerank_http import make_session

    guarded = guard_session(make_session(max_retries=2, backoff=0.1, pool_size=3), OutboundPolicy())
    adapter = guarded.get_adapter("https://example.org/")
    assert type(adapter).__name__ == "GuardedAdapter"
    assert adapter.max_retries.total == 2 and adapter._pool_maxsize == 3


def test_httpx_client_is_guarded_at_the_socket_and_at_each_hop(port, local, resolver):
    with guarded_client(local, timeout=5, follow_redirects=True) as client:
        assert client.get(f"http://service.test:{port}/ok").json() == {"host": f"service.test:{port}"}
        for to, reason in FORBIDDEN_HOPS[:3]:
            with pytest.raises(OutboundURLError, match=reason):
                client.get(redirect(port, to))
        with pytest.raises(httpx.ConnectError):
            client.get(redirect(port, FORBIDDEN_HOPS[3][0]))
    assert resolver.calls.count("service.test") == 1
    with guarded_client(OutboundPolicy(resolver=resolver), timeout=5) as client:
        with pytest.raises(OutboundURLError, match="loopback"):
            client.get(f"http://127.0.0.1:{port}/ok")


def test_httpx_async_client_is_guarded(port, local):
    async def calls() -> dict:
        async with guarded_async_client(local, timeout=5, follow_redirects=True) as client:
            with pytest.raises(OutboundURLError, match="inward.test resolves to 10.0.0.5"):
                await client.get(redirect(port, "http://inward.test/"))
            with pytest.raises(OutboundURLError, match="metadata"):
                await client.get(redirect(port, "http://169.254.169.254/"))
            return (await client.get(f"http://service.test:{port}/ok")).json()

    assert asyncio.run(calls()) == {"host": f"service.test:{port}"}
