"""reconnect: replay what a client missed from the bounded log, or a snapshot when it cannot."""
from sessions_app.events import prune_action_log

from .harness import AhpClient


def reconnect(port, token, client_id, last_seen, channels):
    client = AhpClient(port, token, client_id, initialize=False)
    return client, client.call("reconnect", {"channel": "ahp-root://", "clientId": client_id,
                                             "lastSeenServerSeq": last_seen, "subscriptions": channels})


def test_reconnect_replays_the_actions_missed_on_subscribed_channels(acme, globex, host):
    with AhpClient(host.port, acme.tokens["member"], "writer") as writer:
        session = writer.create_session()
        writer.subscribe(session)
        last_seen = writer.init_result["serverSeq"]
        with AhpClient(host.port, acme.tokens["member"], "reader") as reader:
            last_seen = reader.call("subscribe", {"channel": session})["snapshot"]["fromSeq"]
        writer.dispatch(session, {"type": "session/titleChanged", "title": "while you were away"})
        writer.action("session/titleChanged")
        foreign = f"ahp-session:/{AhpClient(host.port, globex.tokens['root'], 'g').create_session().split('/')[-1]}"
        client, result = reconnect(host.port, acme.tokens["member"], "reader", last_seen, [session, foreign])
        with client:
            assert result["type"] == "replay" and result["missing"] == [foreign]
            assert [a["action"]["type"] for a in result["actions"]] == ["session/titleChanged"]
            assert result["actions"][0]["origin"]["clientId"] == "writer"
            # And the reconnected client is subscribed again.
            writer.dispatch(session, {"type": "session/titleChanged", "title": "live again"})
            assert client.action("session/titleChanged")["action"]["title"] == "live again"


def test_reconnect_answers_snapshots_when_the_log_no_longer_reaches_back(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "writer") as writer:
        session = writer.create_session()
        for i in range(4):
            writer.dispatch(session, {"type": "session/titleChanged", "title": f"t{i}"})
        writer.subscribe(session)
        prune_action_log(keep=1)
        client, result = reconnect(host.port, acme.tokens["member"], "reader", 0, [session])
        with client:
            assert result["type"] == "snapshot"
            assert result["snapshots"][0]["resource"] == session
            assert result["snapshots"][0]["state"]["title"] == "t3"
