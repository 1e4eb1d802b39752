"""The rules of the SSRF guard: the policy, the URL's form, the address ranges. ``operators.outbound`` is the
front door (and its docstring the description); the guarded clients build on these checks."""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from dataclasses import dataclass, field as dataclass_field
from typing import Callable, Mapping, Sequence
from urllib.parse import urlsplit

from operators.errors import TesseraError

MODE_ENV = "TESSERA_OUTBOUND"
ALLOW_ENV = "TESSERA_ALLOW_HOSTS"
ALLOWED_SCHEMES = ("http", "https")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
#: ``(host, port) -> addresses``; the default asks the system (``socket.getaddrinfo``). Tests inject their own.
Resolver = Callable[[str, int], Sequence[str]]

LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
PRIVATE = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16",
                                                    "100.64.0.0/10", "fc00::/7"))
METADATA_ADDRESSES = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean
    "169.254.170.2",    # AWS ECS task credentials
    "fd00:ec2::254",    # AWS over IPv6
    "100.100.100.200",  # Alibaba Cloud
))
METADATA_HOSTS = frozenset({"metadata", "metadata.google.internal", "metadata.goog", "instance-data",
                            "instance-data.ec2.internal"})
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_HOST_NAME = re.compile(r"^[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\Z")
_NUMERIC_HOST = re.compile(r"^[0-9a-fx.]+\Z")


class OutboundURLError(TesseraError):
    """An outbound URL is malformed, uses a forbidden scheme, or reaches an address the policy blocks."""


def system_resolver(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, in the system's order (raises ``socket.gaierror``)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


@dataclass(frozen=True)
class OutboundPolicy:
    """Which non-public destinations are allowed, and how names are resolved."""

    networks: tuple[IPNetwork, ...] = ()
    hosts: frozenset[str] = frozenset()
    resolver: Resolver = dataclass_field(default=system_resolver, compare=False, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, resolver: Resolver = system_resolver
                 ) -> "OutboundPolicy":
        """The policy ``TESSERA_OUTBOUND`` and ``TESSERA_ALLOW_HOSTS`` describe (module docstring)."""
        environ = os.environ if environ is None else environ
        mode = (environ.get(MODE_ENV) or "").strip().lower() or "server"  # blank: unset, as elsewhere
        if mode not in ("server", "local"):
            raise OutboundURLError(f"{MODE_ENV}={mode!r} is not a mode; use 'server' or 'local'")
        allow = environ.get(ALLOW_ENV, "")
        return cls.parse(f"{allow},loopback" if mode == "local" else allow, resolver=resolver)

    @classmethod
    def parse(cls, allow: str, *, resolver: Resolver = system_resolver) -> "OutboundPolicy":
        """A policy from ``TESSERA_ALLOW_HOSTS``'s syntax: names, addresses, CIDRs, ``loopback``, ``private``."""
        networks: list[IPNetwork] = []
        hosts: set[str] = set()
        for entry in (e.strip().lower() for e in re.split(r"[,\s]+", allow)):
            if not entry:
                continue
            if entry in ("loopback", "private"):
                networks.extend(LOOPBACK if entry == "loopback" else PRIVATE)
                continue
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                if not _HOST_NAME.match(entry.rstrip(".")):
                    raise OutboundURLError(f"{ALLOW_ENV}: {entry!r} is not a host name, an address or a CIDR; "
                                           "separate entries with commas") from None
                hosts.add(entry.rstrip("."))
        return cls(tuple(dict.fromkeys(networks)), frozenset(hosts), resolver)

    def allows(self, host: str, address: IPAddress) -> bool:
        """Whether ``address`` (reached through ``host``) is allowed although it is not public."""
        if host in self.hosts:
            return True
        address = embedded_ipv4(address) or address
        exact = address in METADATA_ADDRESSES  # only an exact entry unlocks the metadata service
        return any(address.version == net.version and address in net and (net.num_addresses == 1 or not exact)
                   for net in self.networks)


@dataclass(frozen=True)
class Target:
    """The parts of a URL the guard judges: scheme, host (lower case, no trailing dot), port, literal address."""

    scheme: str
    host: str
    port: int
    address: IPAddress | None


def parse_url(url: str, *, field: str = "url") -> Target:
    """Split ``url`` and refuse what no outbound call needs (other schemes, credentials, odd characters)."""
    if not isinstance(url, str) or not url:
        raise OutboundURLError("must be a non-empty URL", field=field)
    if re.search(r"[\s\x00-\x1f\x7f\\]", url):
        raise OutboundURLError("contains whitespace, a control character or a backslash", field=field)
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as err:
        raise OutboundURLError(f"is not a valid URL ({err})", field=field) from None
    if parts.scheme not in ALLOWED_SCHEMES:
        raise OutboundURLError(f"scheme {parts.scheme or '(none)'!r} is not allowed; use http:// or https://",
                               field=field)
    if "@" in parts.netloc:
        raise OutboundURLError("must not carry user:password@ (credentials in a URL end up in logs); pass keys "
                               "as parameters (api_key_env)", field=field)
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise OutboundURLError("has no host", field=field)
    address = literal_address(host)
    if address is None:
        host = _idna(host, field)
        if not _HOST_NAME.match(host):
            raise OutboundURLError(f"host {host!r} is not a valid host name", field=field)
    return Target(parts.scheme, host, port or (443 if parts.scheme == "https" else 80), address)


def check_url(url: str, *, policy: OutboundPolicy | None = None, resolve: bool = True, field: str = "url"
              ) -> list[str]:
    """Raise ``OutboundURLError`` unless ``url`` may be called; return the checked addresses.

    ``resolve=False`` checks only what the URL itself says (scheme, form, a literal address, a metadata host
    name): for validating a spec without network access. The guarded clients always resolve and check.
    """
    policy = OutboundPolicy.from_env() if policy is None else policy
    target = parse_url(url, field=field)
    if target.address is None and not resolve:
        _refuse_metadata_name(target.host, policy, field)
        return []
    try:
        return checked_addresses(target.host, target.port, policy, field=field)
    except socket.gaierror as err:
        raise OutboundURLError(f"host {target.host!r} cannot be resolved ({err})", field=field) from None


def checked_addresses(host: str, port: int, policy: OutboundPolicy, *, field: str = "url") -> list[str]:
    """The addresses to connect to for ``host``, each one allowed; a resolver failure propagates unchanged."""
    host = host.strip("[]").rstrip(".").lower()
    literal = literal_address(host)
    if literal is None:
        _refuse_metadata_name(host, policy, field)
    addresses = [literal] if literal is not None else [ipaddress.ip_address(a.split("%")[0])
                                                       for a in policy.resolver(host, port)]
    if not addresses:
        raise OutboundURLError(f"host {host!r} resolves to no address", field=field)
    for address in addresses:
        reason = blocked_reason(address)
        if reason and not policy.allows(host, address):
            if literal is None:
                what = f"{host} resolves to {address}, {reason}"
            else:
                what = f"{address} is {reason}" if host == str(address) else f"{host} means {address}, {reason}"
            hint = host if literal is None else address
            raise OutboundURLError(f"{what}; allow it with {ALLOW_ENV}={hint} (a comma-separated list of hosts, "
                                   "CIDRs, 'loopback', 'private')", field=field)
    return [str(a) for a in addresses]


def blocked_reason(address: IPAddress) -> str | None:
    """Why ``address`` is not a public destination, or None when it is one."""
    embedded = embedded_ipv4(address)
    if embedded is not None:
        return blocked_reason(embedded)
    checks = ((address in METADATA_ADDRESSES, "a cloud metadata address"),
              (address.is_unspecified, "the unspecified address"), (address.is_loopback, "a loopback address"),
              (address.is_link_local, "a link-local address"), (address.is_multicast, "a multicast address"),
              (any(address in net for net in PRIVATE), "a private address"),
              (address.is_reserved, "a reserved address"), (not address.is_global, "not a public address"))
    return next((reason for blocked, reason in checks if blocked), None)


def embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one stands for: mapped, NAT64 (64:ff9b::/96) or 6to4; None otherwise."""
    if address.version == 4:
        return None
    if address.ipv4_mapped is not None or address.sixtofour is not None:
        return address.ipv4_mapped or address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def literal_address(host: str) -> IPAddress | None:
    """``host`` as an address if it is one, IPv4 in any form ``inet_aton`` accepts (``0x7f.1``, ``2130706433``)."""
    try:
        return ipaddress.ip_address(host.strip("[]").split("%")[0])
    except ValueError:
        pass
    if not _NUMERIC_HOST.match(host) or not any(c.isdigit() for c in host.split(".")[-1][:1]):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def _refuse_metadata_name(host: str, policy: OutboundPolicy, field: str) -> None:
    if host in METADATA_HOSTS and host not in policy.hosts:
        raise OutboundURLError(f"{host} is a cloud metadata host; allow it with {ALLOW_ENV}={host}", field=field)


def _idna(host: str, field: str) -> str:
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        raise OutboundURLError(f"host {host!r} is not a valid host name", field=field) from None
