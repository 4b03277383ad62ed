"""Secrets a tenant stores, encrypted at rest (Fernet) and opened only where they are used.

A sealed value is a string `ahp-sealed:<Fernet token>`, so it can sit inside any JSON a model
keeps (an MCP server's env and headers today, an agent connection's key tomorrow). The key
is `AHP_SECRETS_KEY` (one Fernet key, or several comma-separated, the first sealing and all
opening, for rotation); embedded hosts without it use a key file made under the var dir.
"""
import base64
import os
from functools import lru_cache
from typing import Any, TypeGuard, TypeVar

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

PREFIX = "ahp-sealed:"
KEY_FILE_NAME = "secrets.key"
T = TypeVar("T")


class SecretUnreadable(ValueError):
    pass


UNREADABLE = "A stored secret cannot be opened with this host's AHP_SECRETS_KEY; set it again."
WRONG_KEY = ("Refusing to start: this node's AHP_SECRETS_KEY cannot open the secrets sealed in the database. "
             "Give every node the same AHP_SECRETS_KEY, the one they were sealed with (while rotating: the new "
             "key first, then the old one, comma-separated).")
KEY_CHECK_TEXT = "the host's secrets key"


def _key_file() -> bytes:
    path = os.path.join(str(settings.VAR_DIR), KEY_FILE_NAME)
    try:
        # O_EXCL: of several workers starting at once, exactly one writes the key.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        with open(path, "rb") as existing:
            return existing.read().strip()
    with os.fdopen(descriptor, "wb") as created:
        created.write(Fernet.generate_key())
    with open(path, "rb") as written:
        return written.read().strip()


@lru_cache(maxsize=4)
def _box(configured: str) -> MultiFernet:
    keys = [k.strip().encode() for k in configured.split(",") if k.strip()] or [_key_file()]
    for key in keys:
        if len(base64.urlsafe_b64decode(key + b"=" * (-len(key) % 4))) != 32:
            raise SecretUnreadable("AHP_SECRETS_KEY must be Fernet keys (32 url-safe base64 bytes), comma-separated.")
    return MultiFernet([Fernet(key) for key in keys])


def box() -> MultiFernet:
    return _box(settings.AHP_SECRETS_KEY or "")


def is_sealed(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and value.startswith(PREFIX)


def seal(text: str) -> str:
    """Always seals, even text that looks sealed: what a tenant sends is never taken as ciphertext."""
    return PREFIX + box().encrypt(text.encode()).decode()


def unseal(value: T) -> T | str:
    """The plaintext of a sealed value; other values (a client's own, rows from before sealing)
    pass as they are."""
    if not is_sealed(value):
        return value
    try:
        return box().decrypt(value[len(PREFIX):].encode()).decode()
    except (InvalidToken, ValueError):
        raise SecretUnreadable(UNREADABLE) from None


def key_refusal() -> str | None:
    """WRONG_KEY (or the sentence on a malformed key) when this node's secrets key cannot open the
    database's check value, else None. The first node to start seals it; every later start opens
    it and seals it again with the first key, so the old key of a rotation may then be dropped."""
    from .models import SecretsKeyCheck

    try:
        check, made = SecretsKeyCheck.objects.get_or_create(pk=1, defaults={"sealed": seal(KEY_CHECK_TEXT)})
        if not made:
            check.sealed = PREFIX + box().rotate(check.sealed[len(PREFIX):].encode()).decode()
            check.save(update_fields=["sealed"])
    except InvalidToken:
        return WRONG_KEY
    except SecretUnreadable as malformed:
        return str(malformed)
    return None


SEALED_KEYS = ("env", "headers")  # where an MCP server entry keeps its secrets


def sealed_entries(servers: T) -> T | dict[str, Any]:
    """`servers` ({name: entry}) with every not yet sealed env and headers value sealed."""
    if not isinstance(servers, dict):
        return servers
    sealed = {}
    for name, entry in servers.items():
        if isinstance(entry, dict):
            entry = {**entry, **{key: {k: v if is_sealed(v) or not isinstance(v, str) else seal(v)
                                       for k, v in entry[key].items()}
                                 for key in SEALED_KEYS if isinstance(entry.get(key), dict)}}
        sealed[name] = entry
    return sealed
