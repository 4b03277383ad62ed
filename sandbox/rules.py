"""One entry of the operator's outbound allow-list, as the environment or the admin gives it.

An entry is a CIDR or a host name, optionally with a port: `10.0.0.0/8`, `mcp.internal`,
`127.0.0.1/32:8443`, `mcp.internal:443`, `[::1]:8443`, `[fd00::/8]:443` (an IPv6 one with a
port is bracketed). Without a port it allows every port of that destination, except the host's
own services, which no entry allows (sandbox/outbound.py)."""
import ipaddress
from ipaddress import IPv4Network, IPv6Network
from typing import NamedTuple

SHAPE = "a host name or a CIDR such as 127.0.0.1/32, with an optional port (127.0.0.1/32:8443)"
HELP = ("A host name (mcp.internal) or a CIDR (10.0.0.0/8, 127.0.0.1/32), with an optional port: "
        "127.0.0.1/32:8443, mcp.internal:443, [::1]:8443. Without a port it allows every port; a server a "
        "client's plugin declares needs an entry with its port. The host's own database, Redis and port are "
        "never allowed.")


class Rule(NamedTuple):
    kind: str  # "network" or "name"
    value: IPv4Network | IPv6Network | str  # an ip_network, or a lower-case host name
    port: int | None  # None: every port


def _host_and_port(text: str) -> tuple[str, str | None]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if rest and not rest.startswith(":"):
            raise ValueError(f"{text} is not {SHAPE}.")
        return host, rest[1:] if rest else None
    if text.count(":") == 1:  # more than one colon is an IPv6 address without a port
        host, port = text.split(":")
        return host, port
    return text, None


def parse_rule(text: str) -> Rule:
    """The Rule `text` names; ValueError (its message the sentence) when it names none or would
    allow every address: the list makes exceptions to the private-address refusal, not its end."""
    text = text.strip()
    rule = _parsed(text)
    if isinstance(rule.value, IPv4Network | IPv6Network) and rule.value.prefixlen == 0:
        raise ValueError(f"{text} would allow every address, private ones included; "
                         "name the networks the host may reach (10.0.0.0/8, 127.0.0.1/32).")
    return rule


def _parsed(text: str) -> Rule:
    if not text:
        raise ValueError(f"An allow-list entry is {SHAPE}.")
    host, written_port = _host_and_port(text)
    port = None
    if written_port is not None:
        if not (written_port.isdigit() and 1 <= int(written_port) <= 65535):
            raise ValueError(f"{text}: the port after the colon must be a number from 1 to 65535.")
        port = int(written_port)
    try:
        return Rule("network", ipaddress.ip_network(host, strict=False), port)
    except ValueError:
        pass
    name = host.lower().rstrip(".")
    labels = name.split(".")
    if len(name) > 253 or not all(label and len(label) <= 63 and label.replace("-", "").replace("_", "").isalnum()
                                  for label in labels):
        raise ValueError(f"{text} is not {SHAPE}.")
    return Rule("name", name, port)
