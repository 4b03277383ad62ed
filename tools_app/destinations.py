"""Which of a configuration's endpoints the host will not reach as it stands: a private address
not on the outbound allow-list. Said to the operator when they save, not first at a turn."""
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from sandbox.outbound import OutboundRefused, check_destination, unresolved_sentence

from .credentials import masked_url

if TYPE_CHECKING:
    from .config import HostConfig

ALLOW_LIST_HINT = ("sessions cannot reach it until it is on the outbound allow-list "
                   "(AHP_OUTBOUND_ALLOW, or the superuser's outbound allow-list in the admin)")


def _urls(config: "HostConfig") -> list[tuple[str, str]]:
    """(the setting's wire name, its URL) for every http endpoint `config` names."""
    urls = [(f"mcpServers.{name}.url", entry["url"]) for name, entry in (config.mcp_servers or {}).items()
            if isinstance(entry, dict) and entry.get("type") == "http" and entry.get("url")]
    urls += [(f"agentConnections.{provider}.baseUrl", entry["baseUrl"])
             for provider, entry in (config.agent_connections or {}).items()
             if isinstance(entry, dict) and entry.get("baseUrl")]
    return urls


def unreachable_endpoints(config: "HostConfig") -> list[str]:
    """A sentence per endpoint of `config` the host's outbound rules refuse, its URL's secrets masked
    (the sentence reaches the admin's messages and REST answers)."""
    sentences = []
    for setting, url in _urls(config):
        parts = urlsplit(url)
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
            check_destination(parts.hostname or "", port)
        except OutboundRefused as refused:
            if refused.sentence == unresolved_sentence(parts.hostname or ""):
                continue  # not known to be private: a name this machine cannot resolve now may resolve later
            sentences.append(f"{setting} ({masked_url(url)}): {refused.sentence} So {ALLOW_LIST_HINT}.")
        except ValueError:
            continue  # a malformed port was refused by the key's own check
    return sentences
