"""Where the host may connect for a tenant: one decision for every outbound request.

A destination is refused when ANY address its name resolves to is private, loopback,
link-local, multicast, reserved or unspecified (IPv4 and IPv6, IPv4-mapped and 6to4/Teredo
embeddings unwrapped), unless the operator allow-lists it host-wide: `AHP_OUTBOUND_ALLOW`
(comma-separated host names or CIDRs) plus the superuser admin's `OutboundAllow` rows.

The httpx transports check every request, each redirect hop included (httpx hands every hop
to the transport), and connect to the address that was checked, not to a second resolution
of the name: the URL is pinned to the IP, `Host` keeps the name and TLS verifies the name
through the `sni_hostname` extension. So a name that rebinds between check and connect
cannot slip through.
"""
import ipaddress
import socket
import time

import httpx
from django.conf import settings

from .rules import parse_rule

RULES_CACHE_SECONDS = 5


class OutboundRefused(httpx.ConnectError):
    """A destination the host does not connect to; the message is the sentence."""

    def __init__(self, sentence, request=None):
        super().__init__(sentence, request=request)
        self.sentence = sentence


def refused_sentence(host):
    return f"The host does not connect to {host}: it is a private address and not allow-listed."


def unresolved_sentence(host):
    return f"The host could not resolve {host}."


def _environment_rules():
    rules = []
    for text in (settings.AHP_OUTBOUND_ALLOW or "").split(","):
        if text.strip():
            try:
                rules.append(parse_rule(text))
            except ValueError:
                continue  # a typo in the environment allows nothing; the default stays closed
    return rules


_cached = {"at": None, "rules": ()}


def forget_admin_rules():
    """Called after the admin's list changes, so this process reads it again at once."""
    _cached["at"] = None


def _admin_rules():
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


def allow_rules():
    return _environment_rules() + _admin_rules()


def _embedded(address):
    """The address and any IPv4 address it carries (mapped, 6to4, Teredo)."""
    if address.version == 6 and address.ipv4_mapped is not None:
        return [address.ipv4_mapped]  # the IPv4 address is what is reached
    found = [address]
    if address.version == 6:
        for inner in (address.sixtofour, address.teredo and address.teredo[1]):
            if inner is not None:
                found.append(inner)
    return found


def _is_public_one(address):
    return address.is_global and not (address.is_multicast or address.is_reserved or address.is_private
                                      or address.is_loopback or address.is_link_local or address.is_unspecified)


def is_public(address):
    return all(_is_public_one(a) for a in _embedded(address))


def _allowed(address, rules):
    networks = [value for kind, value in rules if kind == "network"]
    return all(_is_public_one(a) or any(a in network for network in networks if network.version == a.version)
               for a in _embedded(address))


def resolve(host, port):
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
        address = ipaddress.ip_address(sockaddr[0].split("%")[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise OutboundRefused(unresolved_sentence(host))
    return addresses


def check_destination(host, port):
    """The addresses the host may connect to for `host`:`port`, the one to use first; raises
    OutboundRefused (its `sentence` naming the host) when any of them is not allowed."""
    addresses = resolve(host, port)
    rules = allow_rules()
    name = host.strip("[]").lower().rstrip(".")
    if ("name", name) in rules:
        return [str(a) for a in addresses]
    if not all(_allowed(a, rules) for a in addresses):
        raise OutboundRefused(refused_sentence(host))
    return [str(a) for a in addresses]


def _pinned(request, address):
    """`request` sent to `address`, still naming its host for HTTP and TLS."""
    host = request.url.host
    if host.strip("[]") == address:
        return request
    extensions = dict(request.extensions)
    if request.url.scheme == "https":
        extensions.setdefault("sni_hostname", host)
    return httpx.Request(request.method, request.url.copy_with(host=address), headers=request.headers,
                         stream=request.stream, extensions=extensions)


def _port(url):
    return url.port or (443 if url.scheme == "https" else 80)


class OutboundTransport(httpx.HTTPTransport):
    """A sync httpx transport that refuses what check_destination refuses."""

    def handle_request(self, request):
        try:
            address = check_destination(request.url.host, _port(request.url))[0]
        except OutboundRefused as refused:
            raise OutboundRefused(refused.sentence, request=request) from None
        return super().handle_request(_pinned(request, address))


class AsyncOutboundTransport(httpx.AsyncHTTPTransport):
    """The async one; the check (DNS and a rarely read allow-list) runs off the event loop."""

    async def handle_request(self, request):
        from channels.db import database_sync_to_async

        check = database_sync_to_async(check_destination, thread_sensitive=False)
        try:
            address = (await check(request.url.host, _port(request.url)))[0]
        except OutboundRefused as refused:
            raise OutboundRefused(refused.sentence, request=request) from None
        return await super().handle_request(_pinned(request, address))


async def acheck_url(url):
    """check_destination for a URL, from async code."""
    from channels.db import database_sync_to_async

    parsed = httpx.URL(url)
    return await database_sync_to_async(check_destination, thread_sensitive=False)(parsed.host, _port(parsed))
