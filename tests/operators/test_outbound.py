"""The SSRF guard: attack URLs refused with the reason, public URLs passed, the policy from the environment.

Names resolve through an injected resolver (a table: no DNS, no network), except ``localhost``, which the
system resolves offline. The clients' tests are in ``test_outbound_clients.py``.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import socket

import pytest

from operators.outbound import (ALLOW_ENV, MODE_ENV, OutboundPolicy, OutboundURLError, check_url, embedded_ipv4,
                                literal_address)

PUBLIC_V4 = "93.184.215.14"
PUBLIC_V6 = "2606:4700:4700::1111"
NAMES = {
    "public.example": [PUBLIC_V4],
    "dual.example": [PUBLIC_V4, PUBLIC_V6],
    "inward.example": ["10.0.0.5"],
    "mixed.example": [PUBLIC_V4, "192.168.1.1"],  # one inward answer is enough: a client may pick any
    "rebound.example": ["127.0.0.1"],
    "v6inward.example": ["fd00::1"],
    "cgnat.example": ["100.64.0.1"],
    "metadata.google.internal": ["169.254.169.254"],
    "metadata-alias.example": ["169.254.169.254"],
    "localhost": ["127.0.0.1", "::1"],
}


def table_resolver(host: str, port: int) -> list[str]:
    if host not in NAMES:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return NAMES[host]


SERVER = OutboundPolicy(resolver=table_resolver)

ATTACKS = [
    # loopback, in every spelling the C resolver accepts
    ("http://127.0.0.1/", "loopback"),
    ("http://127.0.0.1:8265/api/jobs/", "loopback"),  # Ray's job API
    ("http://2130706433/", "loopback"),
    ("http://0177.0.0.1/", "loopback"),
    ("http://0x7f.1/", "loopback"),
    ("http://0x7f000001/", "loopback"),
    ("http://017700000001/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://127.000.000.001/", "loopback"),
    ("http://[::1]/", "loopback"),
    ("http://[::ffff:127.0.0.1]/", "loopback"),
    ("http://[::ffff:7f00:1]/", "loopback"),
    ("http://[0:0:0:0:0:ffff:127.0.0.1]/", "loopback"),
    ("http://[64:ff9b::127.0.0.1]/", "loopback"),  # NAT64
    ("http://[2002:7f00:1::]/", "loopback"),       # 6to4
    ("http://[::127.0.0.1]/", "reserved"),         # IPv4-compatible (deprecated)
    ("http://localhost/", "loopback"),
    ("http://LOCALHOST./", "loopback"),
    ("HTTP://127.0.0.1/", "loopback"),
    ("http://rebound.example/", "rebound.example resolves to 127.0.0.1"),
    # cloud metadata
    ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ("http://[::ffff:169.254.169.254]/", "metadata"),
    ("http://0xa9fea9fe/", "metadata"),
    ("http://2852039166/", "metadata"),
    ("http://169.254.170.2/v2/credentials", "metadata"),
    ("http://[fd00:ec2::254]/", "metadata"),
    ("http://100.100.100.200/latest/meta-data/", "metadata"),
    ("http://metadata.google.internal/computeMetadata/v1/", "metadata host"),
    ("http://metadata.google.internal./computeMetadata/v1/", "metadata host"),
    ("http://metadata-alias.example/", "metadata"),
    # unspecified, private, link-local, multicast, reserved
    ("http://0.0.0.0/", "unspecified"),
    ("http://0/", "unspecified"),
    ("http://[::]/", "unspecified"),
    ("http://10.0.0.1/", "private"),
    ("http://172.16.0.1/", "private"),
    ("http://192.168.0.1:8080/", "private"),
    ("http://100.64.0.1/", "private"),
    ("http://[fd00::1]/", "private"),
    ("http://169.254.1.1/", "link-local"),
    ("http://[fe80::1%25eth0]/", "link-local"),
    ("http://224.0.0.1/", "multicast"),
    ("http://[ff02::1]/", "multicast"),
    ("http://240.0.0.1/", "reserved"),
    ("http://192.0.2.1/", "not a public address"),  # documentation range
    # names that resolve inward
    ("http://inward.example/", "inward.example resolves to 10.0.0.5"),
    ("http://mixed.example/", "mixed.example resolves to 192.168.1.1, a private address"),
    ("http://v6inward.example/", "private"),
    ("http://cgnat.example/", "private"),
    # schemes
    ("file:///etc/passwd", "scheme 'file'"),
    ("FILE:///etc/passwd", "scheme 'file'"),
    ("gopher://127.0.0.1:6379/_INFO", "scheme 'gopher'"),
    ("ftp://public.example/", "scheme 'ftp'"),
    ("data:text/plain,hello", "scheme 'data'"),
    ("dict://127.0.0.1:11211/stat", "scheme 'dict'"),
    ("ldap://127.0.0.1/", "scheme 'ldap'"),
    ("//127.0.0.1/", "scheme '(none)'"),
    ("127.0.0.1", "scheme '(none)'"),
    # parser tricks
    ("http://public.example@127.0.0.1/", "user:password@"),
    ("http://user:pass@public.example/", "user:password@"),
    ("http://127.0.0.1\\@public.example/", "backslash"),
    (" http://127.0.0.1/", "whitespace"),
    ("http://127.0.0.1/\n", "whitespace"),
    ("http://public.example\t.evil/", "whitespace"),
    ("http://public.example%00.evil/", "not a valid host name"),
    ("http://\uff11\uff12\uff17.0.0.1/", "loopback"),  # full-width digits: IDNA makes them 127.0.0.1
    ("http://%31%32%37.0.0.1/", "not a valid host name"),
    ("http:///etc/passwd", "no host"),
    ("http://public.example:99999/", "not a valid URL"),
]


@pytest.mark.parametrize("url, reason", ATTACKS)
def test_attack_urls_are_refused_with_the_reason(url, reason):
    with pytest.raises(OutboundURLError) as info:
        check_url(url, policy=SERVER)
    assert reason in info.value.message
    assert info.value.field == "url"


def test_there_are_at_least_thirty_attacks():
    assert len(ATTACKS) >= 30


def test_localhost_is_refused_through_the_system_resolver():
    with pytest.raises(OutboundURLError, match="localhost resolves to .* loopback"):
        check_url("http://localhost:8000/v1/rerank", policy=OutboundPolicy())


@pytest.mark.parametrize("url, addresses", [
    ("https://public.example/v2/rerank", [PUBLIC_V4]),
    ("HTTPS://PUBLIC.EXAMPLE/v2/rerank", [PUBLIC_V4]),
    ("http://public.example./", [PUBLIC_V4]),
    ("https://dual.example/", [PUBLIC_V4, PUBLIC_V6]),
    (f"http://{PUBLIC_V4}:8080/rerank", [PUBLIC_V4]),
    (f"http://[{PUBLIC_V6}]/", [PUBLIC_V6]),
    (f"http://[::ffff:{PUBLIC_V4}]/", [str(ipaddress.ip_address(f"::ffff:{PUBLIC_V4}"))]),
    (f"http://[64:ff9b::{PUBLIC_V4}]/", [str(ipaddress.ip_address(f"64:ff9b::{PUBLIC_V4}"))]),
    ("https://public.example/search?q=a%20b&pw=x", [PUBLIC_V4]),
])
def test_public_urls_pass_and_return_the_checked_addresses(url, addresses):
    assert check_url(url, policy=SERVER) == addresses


def test_the_error_names_the_field_and_how_to_allow_the_host():
    with pytest.raises(OutboundURLError) as info:
        check_url("http://127.0.0.1:8000/v1/rerank", policy=SERVER, field="api_base")
    assert str(info.value) == ("field 'api_base': 127.0.0.1 is a loopback address; allow it with "
                               "TESSERA_ALLOW_HOSTS=127.0.0.1 (a comma-separated list of hosts, CIDRs, 'loopback', "
                               "'private')")
    with pytest.raises(OutboundURLError, match=f"{ALLOW_ENV}=inward.example "):
        check_url("http://inward.example/", policy=SERVER)


def test_an_unresolvable_host_is_an_error_naming_it():
    with pytest.raises(OutboundURLError, match="'nowhere.example' cannot be resolved"):
        check_url("http://nowhere.example/", policy=SERVER)


def test_without_resolving_only_what_the_url_says_is_checked():
    assert check_url("http://inward.example/", policy=SERVER, resolve=False) == []
    with pytest.raises(OutboundURLError, match="loopback"):
        check_url("http://0x7f.1/", policy=SERVER, resolve=False)
    with pytest.raises(OutboundURLError, match="metadata host"):
        check_url("http://metadata.google.internal/", policy=SERVER, resolve=False)


def policy_from(**environ: str) -> OutboundPolicy:
    return OutboundPolicy.from_env(environ, resolver=table_resolver)


def test_the_default_mode_is_the_server_policy():
    with pytest.raises(OutboundURLError, match="loopback"):
        check_url("http://127.0.0.1/", policy=policy_from())
    with pytest.raises(OutboundURLError, match="loopback"):
        check_url("http://127.0.0.1/", policy=policy_from(**{MODE_ENV: "server"}))


def test_the_local_mode_allows_loopback_and_nothing_else():
    local = policy_from(**{MODE_ENV: "local"})
    for url in ("http://127.0.0.1:11434/", "http://localhost/", "http://[::1]/", "http://[::ffff:127.0.0.1]/",
                "http://0x7f.1/", "http://rebound.example/"):
        assert check_url(url, policy=local)
    for url, reason in [("http://0.0.0.0/", "unspecified"), ("http://10.0.0.1/", "private"),
                        ("http://169.254.169.254/", "metadata"), ("http://inward.example/", "private")]:
        with pytest.raises(OutboundURLError, match=reason):
            check_url(url, policy=local)


def test_allowed_hosts_cidrs_and_words():
    policy = policy_from(**{ALLOW_ENV: " 10.0.0.0/8, mosaic.internal.,[fd00::1] private"})
    NAMES["mosaic.internal"] = ["172.20.0.9"]
    try:
        assert check_url("http://10.1.2.3/", policy=policy) == ["10.1.2.3"]
        assert check_url("http://inward.example/", policy=policy) == ["10.0.0.5"]
        assert check_url("http://mosaic.internal:8008/search", policy=policy) == ["172.20.0.9"]
        assert check_url("http://[fd00::1]/", policy=policy) == ["fd00::1"]
        assert check_url("http://192.168.4.4/", policy=policy) == ["192.168.4.4"]  # "private"
    finally:
        del NAMES["mosaic.internal"]
    with pytest.raises(OutboundURLError, match="loopback"):
        check_url("http://127.0.0.1/", policy=policy)


def test_metadata_is_unlocked_only_by_its_exact_address_or_name():
    wide = policy_from(**{ALLOW_ENV: "169.254.0.0/16,100.64.0.0/10"})
    assert check_url("http://169.254.1.1/", policy=wide)
    for url in ("http://169.254.169.254/", "http://[::ffff:169.254.169.254]/", "http://100.100.100.200/"):
        with pytest.raises(OutboundURLError, match="metadata"):
            check_url(url, policy=wide)
    exact = policy_from(**{ALLOW_ENV: "169.254.169.254,metadata.google.internal"})
    assert check_url("http://169.254.169.254/", policy=exact)
    assert check_url("http://metadata.google.internal/", policy=exact)


@pytest.mark.parametrize("environ, message", [
    ({ALLOW_ENV: "http://10.0.0.1/"}, "not a host name, an address or a CIDR"),
    ({MODE_ENV: "open"}, "not a mode"),
])
def test_a_bad_setting_is_an_error_naming_the_variable(environ, message):
    with pytest.raises(OutboundURLError, match=message) as info:
        policy_from(**environ)
    assert next(iter(environ)) in str(info.value)


@pytest.mark.parametrize("host, address", [
    ("2130706433", "127.0.0.1"), ("0177.0.0.1", "127.0.0.1"), ("0x7f.1", "127.0.0.1"), ("10.1", "10.0.0.1"),
    ("[::1]", "::1"), ("fe80::1%eth0", "fe80::1"), ("cafe.example", None), ("1.2.3.999", None),
])
def test_literal_addresses_are_read_as_the_c_resolver_reads_them(host, address):
    found = literal_address(host)
    assert (str(found) if found is not None else None) == address


@pytest.mark.parametrize("address, embedded", [
    ("::ffff:10.0.0.1", "10.0.0.1"), ("64:ff9b::a00:1", "10.0.0.1"), ("2002:a00:1::", "10.0.0.1"),
    ("2606:4700:4700::1111", None), ("10.0.0.1", None),
])
def test_embedded_ipv4(address, embedded):
    found = embedded_ipv4(ipaddress.ip_address(address))
    assert (str(found) if found is not None else None) == embedded


@pytest.mark.parametrize("preset, seen", [(None, "local"), ("server", "server")])
def test_the_cli_allows_loopback_unless_told_otherwise(monkeypatch, preset, seen):
    from flows.commands import run_handler

    if preset is None:
        monkeypatch.delenv(MODE_ENV, raising=False)
    else:
        monkeypatch.setenv(MODE_ENV, preset)
    modes = []
    assert run_handler(lambda args: modes.append(os.environ[MODE_ENV]) or 0, argparse.Namespace()) == 0
    assert modes == [seen]
