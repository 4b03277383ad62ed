"""A subscriber whose layer messages are lost still gets every action, once: the heartbeat sends
each socket what the action log holds beyond what it has heard (a recovered action may come after
higher numbers; clients apply by serverSeq)."""
import copy
import time
import uuid

import pytest
from django.db import transaction

from sessions_app import events
from sessions_app.events import sockets

from .harness import AhpClient, ServerThread

BURST = 50


@pytest.fixture
def host_with_a_one_message_layer(transactional_db, settings, monkeypatch):
    """A server whose channel layer holds one undelivered message per channel and drops the rest,
    with a heartbeat of 0.2 s."""
    layers = copy.deepcopy(settings.CHANNEL_LAYERS)
    layers["default"]["CONFIG"]["capacity"] = 1
    settings.CHANNEL_LAYERS = layers
    monkeypatch.setattr(sockets, "HEARTBEAT_SECONDS", 0.2)
    with ServerThread() as server:
        yield server


def titles_heard(client, channel, count, timeout=15):
    """(serverSeq, title) of the first `count` title changes `client` hears on `channel`, then of
    any more it hears within half a second (there should be none)."""
    titles, deadline = [], time.monotonic() + timeout
    settle_until = None
    while True:
        now = time.monotonic()
        if len(titles) >= count and settle_until is None:
            settle_until = now + 0.5
        if (settle_until is not None and now >= settle_until) or now >= deadline:
            return titles
        try:
            frame = client.read(min(deadline, settle_until or deadline) - now)
        except TimeoutError:
            continue
        action = frame.get("params", {}) if frame.get("method") == "action" else {}
        if action.get("channel") == channel and action["action"]["type"] == "session/titleChanged":
            titles.append((action["serverSeq"], action["action"]["title"]))


def test_a_subscriber_whose_layer_messages_are_dropped_still_gets_every_action_once(
        acme, host_with_a_one_message_layer):
    session = f"ahp-session:/{uuid.uuid4()}"
    with AhpClient(host_with_a_one_message_layer.port, acme.tokens["member"], "alice") as alice:
        alice.call("createSession", {"channel": session, "provider": "echo"})
        alice.subscribe(session)
        burst = [(session, {"type": "session/titleChanged", "title": f"title {i}"}, None) for i in range(BURST)]
        with transaction.atomic():  # one delivery of 50 envelopes: the layer keeps the first
            events.publish_many(acme.tenant.pk, burst)
        heard = titles_heard(alice, session, BURST)
        assert [title for _, title in sorted(heard)] == [f"title {i}" for i in range(BURST)]
