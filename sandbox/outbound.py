"""Where the host may connect for a tenant: one decision for every outbound request.

The host's own services (its database, Redis, the ports it serves on) are never a destination,
whatever the allow-list says. Any other destination is refused when ANY address its name
resolves to is private, loopback, link-local, multicast, reserved or unspecified (IPv4 and
IPv6, IPv4-mapped and 6to4/Teredo embeddings unwrapped), unless the operator allow-lists it
host-wide: `AHP_OUTBOUND_ALLOW` (comma-separated entries, `sandbox.rules`) plus the superuser
admin's `OutboundAllow` rows. A server a client declared (its plugins' `.mcp.json`) at a private
address needs an entry naming its port: an entry without one does not admit it.

The httpx transports check every request, each redirect hop included (httpx hands every hop
to the transport), and connect to the address that was checked, not to a second resolution
of the name: the URL is pinned to the IP, `Host` keeps the name and TLS verifies the name
through the `sni_hostname` extension. So a name that rebinds between check and connect
cannot slip through.
"""
import ipaddress
import os
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings

from .rules import Rule, parse_rule

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

RULES_CACHE_SECONDS = 5
# Marks an MCP server entry a client declared (its plugins' .mcp.json), for check_destination.
CLIENT_DECLARED = "clientDeclared"


class OutboundRefused(httpx.ConnectError):
    """A destination the host does not connect to; the message is the sentence."""

    def __init__(self, sentence: str, request: httpx.Request | None = None) -> None:
        super().__init__(sentence, request=request)
        self.sentence = sentence


def host_and_port(host: str, port: int) -> str:
    bare = host.strip("[]")
    return f"[{bare}]:{port}" if ":" in bare else f"{host}:{port}"


def refused_sentence(host: str, port: int) -> str:
    return f"The host does not connect to {host_and_port(host, port)}: it is a private address and not allow-listed."


def own_service_sentence(host: str, port: int) -> str:
    return f"The host does not connect to {host_and_port(host, port)}: it is one of the host's own services."


def client_declared_sentence(host: str, port: int) -> str:
    return (f"The host does not connect to {host_and_port(host, port)} for a client's server: a private address "
            "needs an allow-list entry with that port.")


def unresolved_sentence(host: str) -> str:
    return f"The host could not resolve {host}."


def _environment_rules() -> list[Rule]:
    rules = []
    for text in (settings.AHP_OUTBOUND_ALLOW or "").split(","):
        if text.strip():
            try:
                rules.append(parse_rule(text))
            except ValueError:
                continue  # a typo in the environment allows nothing; the default stays closed
    return rules


_cached: dict[str, Any] = {"at": None, "rules": ()}


def forget_admin_rules() -> None:
    """Called after the admin's list changes, so this process reads it again at once."""
    _cached["at"] = None


def _admin_rules() -> list[Rule]:
    now = time.monotonic()
    if _cached["at"] is None or now - _cached["at"] > RULES_CACHE_SECONDS:
        from .models import OutboundAllow

        rules = []
        for text in OutboundAllow.objects.values_list("entry", flat=True):
            try:
                rules.append(parse_rule(text))
            except ValueError:
                continue
        _cached.update(at=now, rules=tuple(rules))
    return list(_cached["rules"])


def allow_rules() -> list[Rule]:
    return _environment_rules() + _admin_rules()


# The port this process last served a connection on (ahp.asgi notes it).
_served: dict[str, int] = {}
DATABASE_PORTS = {"postgis": 5432, "postgresql": 5432, "mysql": 3306, "oracle": 1521}


def remember_served_port(port: int | str) -> None:
    _served["port"] = int(port)


def own_services() -> list[tuple[str | None, int]]:
    """(host, port) of each of the host's own services; host None is this machine. Its
    databases, Redis, and the ports it serves HTTP on here: runhost's PORT, this process's,
    AHP_MCP_BASE_URL's (on this machine only: its name may be a front shared with other sites)."""
    services = []
    for database in settings.DATABASES.values():
        engine = database.get("ENGINE", "")
        port = database.get("PORT") or next((p for name, p in DATABASE_PORTS.items() if name in engine), None)
        if port and "sqlite" not in engine:
            host = database.get("HOST") or ""
            services.append((None if host.startswith("/") or not host else host, int(port)))  # a socket path: local
    for url in {settings.REDIS_URL, getattr(settings, "CELERY_BROKER_URL", "")}:
        parts = urlsplit(url or "")
        if parts.scheme in ("redis", "rediss"):
            services.append((parts.hostname, parts.port or 6379))
    services.append((None, int(os.environ.get("PORT") or 8000)))
    if "port" in _served:
        services.append((None, _served["port"]))
    base = os.environ.get("AHP_MCP_BASE_URL")
    if base:
        parts = urlsplit(base)
        services.append((None, parts.port or (443 if parts.scheme == "https" else 80)))
    return services


def _on_this_machine(address: IPAddress) -> bool:
    """Whether connecting to `address` reaches this machine: loopback, unspecified (0.0.0.0 is
    this host), or an address of one of its interfaces (which a socket can bind)."""
    if address.is_loopback or address.is_unspecified:
        return True
    with socket.socket(socket.AF_INET6 if address.version == 6 else socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.bind((str(address), 0))
        except OSError:
            return False
    return True


def _is_own_service(addresses: list[IPAddress], port: int) -> bool:
    """Whether `port` at any of `addresses` is one of the host's own services, compared by address."""
    hosts = [host for host, service_port in own_services() if service_port == port]
    if not hosts:
        return False
    reached = {inner for address in addresses for inner in _embedded(address)}
    # A local service listens on loopback, 0.0.0.0 or an interface: each of them is this machine.
    local = any(_on_this_machine(a) for a in reached)
    for host in hosts:
        if host is None:
            if local:
                return True
            continue
        try:
            service = {inner for address in resolve(host, port) for inner in _embedded(address)}
        except OutboundRefused:  # a name the host cannot resolve is no service it reaches either
            continue
        if reached & service or (local and any(_on_this_machine(a) for a in service)):
            return True
    return False


def _embedded(address: IPAddress) -> list[IPAddress]:
    """The address and any IPv4 address it carries (mapped, 6to4, Teredo)."""
    if address.version == 6 and address.ipv4_mapped is not None:
        return [address.ipv4_mapped]  # the IPv4 address is what is reached
    found = [address]
    if address.version == 6:
        for inner in (address.sixtofour, address.teredo and address.teredo[1]):
            if inner is not None:
                found.append(inner)
    return found


def _is_public_one(address: IPAddress) -> bool:
    return address.is_global and not (address.is_multicast or address.is_reserved or address.is_private
                                      or address.is_loopback or address.is_link_local or address.is_unspecified)


def is_public(address: IPAddress) -> bool:
    return all(_is_public_one(a) for a in _embedded(address))


def _allowed(address: IPAddress, rules: list[Rule]) -> bool:
    networks = [rule.value for rule in rules if not isinstance(rule.value, str)]
    return all(_is_public_one(a) or any(a in network for network in networks if network.version == a.version)
               for a in _embedded(address))


def resolve(host: str, port: int) -> list[IPAddress]:
    """The addresses `host` names: itself when it is an IP literal, else every DNS answer."""
    bare = host.strip("[]").split("%")[0]
    try:
        return [ipaddress.ip_address(bare)]
    except ValueError:
        pass
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise OutboundRefused(unresolved_sentence(host)) from None
    addresses = []
    for *_, sockaddr in answers:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise OutboundRefused(unresolved_sentence(host))
    return addresses


def check_destination(host: str, port: int, client_declared: bool = False) -> list[str]:
    """The addresses the host may connect to for `host`:`port`, the one to use first; raises
    OutboundRefused (its `sentence` naming the destination) when any of them is not allowed.
    `client_declared`: a client named it, so only entries naming this port admit a private address."""
    addresses = resolve(host, port)
    if _is_own_service(addresses, port):
        raise OutboundRefused(own_service_sentence(host, port))
    rules = [rule for rule in allow_rules() if rule.port == port or (rule.port is None and not client_declared)]
    name = host.strip("[]").lower().rstrip(".")
    if any(rule.kind == "name" and rule.value == name for rule in rules):
        return [str(a) for a in addresses]
    if not all(_allowed(a, rules) for a in addresses):
        raise OutboundRefused((client_declared_sentence if client_declared else refused_sentence)(host, port))
    return [str(a) for a in addresses]


def _pinned(request: httpx.Request, address: str) -> httpx.Request:
    """`request` sent to `address`, still naming its host for HTTP and TLS."""
    host = request.url.host
    if host.strip("[]") == address:
        return request
    extensions = dict(request.extensions)
    if request.url.scheme == "https":
        extensions.setdefault("sni_hostname", host)
    return httpx.Request(request.method, request.url.copy_with(host=address), headers=request.headers,
                         stream=request.stream, extensions=extensions)


def _port(url: httpx.URL) -> int:
    return url.port or (443 if url.scheme == "https" else 80)


class OutboundTransport(httpx.HTTPTransport):
    """A sync httpx transport that refuses what check_destination refuses."""

    def __init__(self, *args: Any, client_declared: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.client_declared = client_declared

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            address = check_destination(request.url.host, _port(request.url), self.client_declared)[0]
        except OutboundRefused as refused:
            raise OutboundRefused(refused.sentence, request=request) from None
        return super().handle_request(_pinned(request, address))


class AsyncOutboundTransport(httpx.AsyncHTTPTransport):
    """The async one; the check (DNS and a rarely read allow-list) runs off the event loop."""

    def __init__(self, *args: Any, client_declared: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.client_declared = client_declared

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        from channels.db import database_sync_to_async

        check = database_sync_to_async(check_destination, thread_sensitive=False)
        try:
            address = (await check(request.url.host, _port(request.url), self.client_declared))[0]
        except OutboundRefused as refused:
            raise OutboundRefused(refused.sentence, request=request) from None
        return await super().handle_async_request(_pinned(request, address))


async def acheck_url(url: str, client_declared: bool = False) -> list[str]:
    """check_destination for a URL, from async code."""
    from channels.db import database_sync_to_async

    parsed = httpx.URL(url)
    return await database_sync_to_async(check_destination, thread_sensitive=False)(
        parsed.host, _port(parsed), client_declared)
