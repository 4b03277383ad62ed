"""Every frame of a scripted session, both ways, checked against a JSON Schema of the AHP 1.1
types kept beside this test (schema/ahp-1.1.schema.json, written by hand from the types:
schema/make_schema.py says how): initialize, subscriptions, turns, chats, files, a resource watch,
completions, a rejection, an error, and a reconnect's replay."""
import json
import uuid

import pytest

from ...conftest import tenant_made
from .harness import INIT_VERSION, AhpClient, RpcFailed
from .wire_schema import SCHEMA, validator

ROOT = "ahp-root://"


class RecordingClient(AhpClient):
    """An AhpClient that keeps every frame it sends and receives, and the method of each request."""

    def __init__(self, *args, **kwargs):
        self.sent, self.received, self.methods = [], [], {}
        super().__init__(*args, initialize=False, **kwargs)
        self.init_result = self.call("initialize", {"channel": ROOT, "protocolVersions": [INIT_VERSION],
                                                    "clientId": self.client_id})

    def send(self, payload):
        frame = json.loads(payload) if isinstance(payload, (str, bytes)) else payload
        self.sent.append(frame)
        if "id" in frame and "method" in frame:
            self.methods[frame["id"]] = frame["method"]
        super().send(payload)

    def read(self, timeout):
        frame = super().read(timeout)
        self.received.append(frame)
        return frame


def violations(client):
    """(direction, what, the violation) of each frame the schema refuses."""
    found = []
    checks = {name: validator(name) for name in ("clientMessage", "serverResponse", "serverNotification")}
    for frame in client.sent:
        found += [("sent", frame.get("method"), e.message) for e in checks["clientMessage"].iter_errors(frame)]
    for frame in client.received:
        if "method" in frame:
            found += [("received", frame["method"], e.message)
                      for e in checks["serverNotification"].iter_errors(frame)]
            continue
        found += [("received", "response", e.message) for e in checks["serverResponse"].iter_errors(frame)]
        method = client.methods.get(frame.get("id"))
        if "result" in frame and f"result:{method}" in SCHEMA["$defs"]:
            found += [("received", method, e.message)
                      for e in validator(f"result:{method}").iter_errors(frame["result"])]
    return found


@pytest.fixture
def project(acme, workspace):
    folder = workspace / "app"
    folder.mkdir()
    (folder / "README.md").write_text("hello\n")
    return tenant_made(folder, acme.tenant)


def script(client, project):
    """A session as a client drives one: what each step answers is asserted by the other tests;
    here every frame on the way is kept."""
    client.subscribe(ROOT)
    session = client.create_session(workingDirectories=[project.as_uri()])
    state = client.subscribe(session)
    chat = state["defaultChat"]
    client.subscribe(chat)
    turn = client.start_turn(chat, "hello there")
    client.reply_to(turn)
    client.dispatch(session, {"type": "session/titleChanged", "title": "Scripted"})
    client.dispatch(session, {"type": "session/isReadChanged", "isRead": True})
    client.dispatch(chat, {"type": "chat/pendingMessageSet", "kind": "queued", "id": str(uuid.uuid4()),
                           "message": {"text": "queued one", "origin": {"kind": "user"}}})
    client.action("chat/turnComplete", timeout=20)
    client.dispatch(session, {"type": "session/activeClientSet", "activeClient": {
        "clientId": client.client_id, "tools": [{"name": "open_file", "description": "Open a file",
                                                 "inputSchema": {"type": "object"}}]}})
    client.action("session/activeClientSet")
    called = client.start_turn(chat, f'/call {client.client_id}__open_file {{"path": "README.md"}}')
    call = client.action("chat/toolCallStart", turnId=called)["action"]["toolCallId"]
    client.dispatch(chat, {"type": "chat/toolCallComplete", "turnId": called, "toolCallId": call,
                           "result": {"success": True, "pastTenseMessage": "Opened the file",
                                      "content": [{"type": "text", "text": "opened"}]}})
    client.action("chat/turnComplete", turnId=called, timeout=20)
    second = f"ahp-chat:/{uuid.uuid4()}"
    client.call("createChat", {"channel": session, "chat": second})
    client.call("createChat", {"channel": session, "chat": f"ahp-chat:/{uuid.uuid4()}",
                               "source": {"kind": "fork", "chat": chat, "turnId": turn}})
    client.dispatch(session, {"type": "session/defaultChatChanged", "defaultChat": second})
    client.dispatch(chat, {"type": "chat/truncated", "turnId": str(uuid.uuid4())})  # rejected: no such turn
    client.action("chat/truncated", rejected=True)
    client.dispatch(session, {"type": "session/defaultChatChanged", "defaultChat": chat})
    client.action("session/defaultChatChanged", defaultChat=chat)
    client.call("disposeChat", {"channel": second})
    client.call("fetchTurns", {"channel": chat})
    client.call("listSessions", {"channel": ROOT})
    readme = (project / "README.md").as_uri()
    client.call("resourceList", {"channel": ROOT, "uri": project.as_uri()})
    client.call("resourceRead", {"channel": ROOT, "uri": readme})
    etag = client.call("resourceResolve", {"channel": ROOT, "uri": readme})["etag"]
    client.call("resourceWrite", {"channel": ROOT, "uri": readme, "data": "bye\n", "encoding": "utf-8",
                                  "ifMatch": etag})
    client.call("resourceMkdir", {"channel": ROOT, "uri": (project / "docs").as_uri()})
    client.call("resourceRequest", {"channel": ROOT, "uri": readme, "write": True})
    client.call("completions", {"channel": chat, "kind": "userMessage", "text": "see @RE", "offset": 7})
    watch = client.call("createResourceWatch", {"channel": ROOT, "uri": project.as_uri()})["channel"]
    client.call("subscribe", {"channel": watch})
    (project / "new.txt").write_text("x")
    client.action("resourceWatch/changed", timeout=10)
    with pytest.raises(RpcFailed):
        client.call("noSuchMethod", {"channel": ROOT})
    client.call("ping", {"channel": ROOT})
    return session, chat


def test_every_frame_of_a_scripted_session_fits_the_protocols_types(acme, host, project, settings):
    settings.AHP_RESOURCE_WATCH_SECONDS = 0.1
    with RecordingClient(host.port, acme.tokens["member"], "scripted") as client:
        session, chat = script(client, project)
        last_seen = client.init_result["serverSeq"]
        counts = {"sent": len(client.sent), "received": len(client.received)}
        found = violations(client)
    with RecordingClient(host.port, acme.tokens["member"], "scripted-again") as again:
        replay = again.call("reconnect", {"channel": ROOT, "clientId": "scripted", "lastSeenServerSeq": last_seen,
                                          "subscriptions": [ROOT, session, chat]})
        assert replay["type"] == "replay" and replay["actions"], replay
        counts["replayed actions"] = len(replay["actions"])
        counts["sent"] += len(again.sent)
        counts["received"] += len(again.received)
        found += violations(again)
    print(f"AHP 1.1 frames checked: {counts}")
    assert counts["received"] > 40 and counts["sent"] > 25, counts
    assert found == [], "\n".join(map(str, found))
