"""The rule files the active clients publish, as the (file name, text) pairs the catalog's
`rule_body` reads.

A published plugin lists its rules as `rule` children (AHP RuleCustomization: uri, name,
alwaysApply, globs); the text is not part of the customization. Only a rule whose `uri` is a
`data:` URI carries its text inline; any other rule would have to be read from the client
(resourceRead), a round trip per model request the catalog does not make, so it is left out,
with one log line per rule and process (the catalog is read at every model request).
"""
import base64
import binascii
import functools
import logging
from typing import Any
from urllib.parse import unquote_to_bytes

logger = logging.getLogger(__name__)


def data_uri_text(uri: str) -> str | None:
    """The UTF-8 text a `data:` URI holds, or None."""
    head, comma, payload = uri[5:].partition(",")
    if not comma:
        return None
    try:
        raw = base64.b64decode(payload, validate=True) if head.endswith(";base64") else unquote_to_bytes(payload)
        return raw.decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


@functools.lru_cache(maxsize=1024)
def left_out_by_reference(name: str, uri: str) -> None:
    logger.warning("Left out rule %s: it is published by reference (%s), and this host reads only rules "
                   "whose text a data: URI carries", name, uri[:200])


def published_rules(customizations: Any) -> list[tuple[str, str]]:
    """(file name, text) of each inline rule in the enabled containers a client published."""
    rules = []
    for container in customizations or ():
        if not isinstance(container, dict) or container.get("enabled") is False:
            continue
        for child in container.get("children") or ():
            if not isinstance(child, dict) or child.get("type") != "rule" or child.get("enabled") is False:
                continue
            uri, name = child.get("uri"), child.get("name")
            if not (isinstance(uri, str) and isinstance(name, str)):
                continue
            if not uri.startswith("data:"):
                left_out_by_reference(name, uri)
                continue
            text = data_uri_text(uri)
            if text is None:
                logger.warning("Dropped rule %s: its data: URI holds no UTF-8 text", name)
                continue
            rules.append((name, text))
    return rules
