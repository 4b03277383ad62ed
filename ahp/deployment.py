"""Whether the host may start as configured: without SECRET_KEY in the environment only an
embedded host (no DATABASE_URL) listening on loopback may, with the key settings keep under its
var directory. Anything else would sign sessions and derive tokens with a key nobody chose. And
a node whose AHP_SECRETS_KEY cannot open the database's sealed secrets may not start at all: it
would fail every tenant's secret it met and seal new ones the other nodes could not open."""
import ipaddress
import os

# A connection must finish sending each request's head and body within this many seconds of
# opening or of its previous response (ahp.serve, and ahp.front for the head it reads).
REQUEST_DEADLINE = float(os.environ.get("AHP_REQUEST_DEADLINE_SECONDS", "20"))
# The most of a request head the front reads before handing the connection over; a larger head
# goes over as it is, for the server to refuse.
HANDOFF_BYTES = 64 * 1024
# How long a WebSocket handshake may take from its upgrade request to the application's answer
# (ahp.serve; daphne's own default, 5 s, drops a connection without a word). It must outlast the
# handshake throttle's longest wait (ahp.protocol.throttle.MAX_DELAY) and the token check on a
# loaded machine, so a slowed failure still gets its refusal.
HANDSHAKE_SECONDS = 15
# The most a serving process holds for a WebSocket client that does not read (16 frames of the
# largest size) before it drops the connection (ahp.serve).
UNREAD_BYTES = int(os.environ.get("AHP_UNREAD_BYTES") or 16 * 1024 * 1024)

# Set by the front for its serving processes: how many it runs (/healthz counts those running).
FRONT_PROCESSES = "AHP_FRONT_PROCESSES"

NO_SECRET_KEY = ("Refusing to start: SECRET_KEY is not set. Set SECRET_KEY to a long random string (for example "
                 "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`); only an embedded host (no "
                 "DATABASE_URL) listening on a loopback address runs without one.")


def is_loopback(host):
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def refusal_to_start(hosts):
    """NO_SECRET_KEY, or None when the host may start listening on `hosts` (None: on something
    other than a TCP address, such as a socket file or descriptor)."""
    if os.environ.get("SECRET_KEY"):
        return None
    if os.environ.get("DATABASE_URL") or hosts is None or not all(is_loopback(h) for h in hosts):
        return NO_SECRET_KEY
    return None



def secrets_key_refusal() -> str | None:
    """The sentence when this node's AHP_SECRETS_KEY cannot open the database's sealed secrets,
    else None; None too while the database cannot tell (not migrated yet, or not answering: the
    node starts and /healthz reports the database). Needs Django set up."""
    from django.db import DatabaseError

    from sandbox.sealing import key_refusal

    try:
        return key_refusal()
    except DatabaseError:
        return None
