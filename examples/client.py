"""A small AHP client that runs a tool of its own for the agent (docs/clients.md walks through it).

It connects, creates a session on the echo agent, announces the tool `shout`, starts a turn that
has the agent call it (`/call example-client__shout {...}`: the echo agent calls the tools a line
names), runs the call when it comes, and prints the agent's reply.

    pip install websockets
    python examples/client.py ws://127.0.0.1:8000/ahp <token printed by make run>

Only the `websockets` library: every frame is spelled out, to be read next to docs/clients.md.
"""
import argparse
import itertools
import json
import sys
import uuid
from typing import Any

from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

CLIENT_ID = "example-client"
SHOUT = {
    "name": "shout",
    "description": "Say the text louder.",
    "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}
PROTOCOL_VERSION = "1.1.0"
SECONDS = 30  # how long the client waits for any one frame


class RequestFailed(Exception):
    """The host answered a request with an error, rejected an action, or the turn did not complete."""


class Connection:
    """One AHP connection: requests wait for their answer, notifications are read in order."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.request_ids = itertools.count(1)
        self.client_seqs = itertools.count(1)
        self.notifications: list[dict[str, Any]] = []  # the ones that came while a request waited

    def send(self, message: dict[str, Any]) -> None:
        self.ws.send(json.dumps({"jsonrpc": "2.0", **message}))

    def request(self, method: str, params: dict[str, Any]) -> Any:
        request_id = next(self.request_ids)
        self.send({"id": request_id, "method": method, "params": params})
        while True:
            frame = json.loads(self.ws.recv(timeout=SECONDS))
            if "method" in frame:
                self.notifications.append(frame)
            elif frame.get("id") == request_id:
                if "error" in frame:
                    raise RequestFailed(f"{method}: {frame['error']['code']} {frame['error']['message']}")
                return frame["result"]

    def dispatch(self, channel: str, action: dict[str, Any]) -> int:
        """Send a client action; the host's answer is an `action` notification carrying this clientSeq."""
        client_seq = next(self.client_seqs)
        self.send({"method": "dispatchAction", "params": {"channel": channel, "clientSeq": client_seq,
                                                          "action": action}})
        return client_seq

    def next_notification(self) -> dict[str, Any]:
        if self.notifications:
            return self.notifications.pop(0)
        while True:
            frame = json.loads(self.ws.recv(timeout=SECONDS))
            if "method" in frame:
                return frame

    def applied(self, client_seq: int) -> dict[str, Any]:
        """The host's echo of this client's action: applied, or refused with its reason."""
        while True:
            frame = self.next_notification()
            envelope = frame["params"]
            if frame["method"] == "action" and (envelope.get("origin") or {}).get("clientId") == CLIENT_ID \
                    and envelope["origin"]["clientSeq"] == client_seq:
                if "rejectionReason" in envelope:
                    raise RequestFailed(f"{envelope['action']['type']}: {envelope['rejectionReason']}")
                return envelope


def shout(arguments: dict[str, Any]) -> str:
    """The client's own tool: it runs here, on the client's side, never on the host."""
    return f"{arguments['text'].upper()}!"


def run_turn(connection: Connection, chat: str, text: str) -> str:
    """Start a turn with `text`, run every call of it that is this client's, and answer the reply."""
    turn_id = str(uuid.uuid4())
    connection.dispatch(chat, {"type": "chat/turnStarted", "turnId": turn_id,
                               "message": {"text": text, "origin": {"kind": "user"}}})
    reply: dict[str, str] = {}  # response part id -> its markdown so far
    while True:
        frame = connection.next_notification()
        if frame["method"] != "action" or frame["params"]["channel"] != chat:
            continue
        action = frame["params"]["action"]
        if action.get("turnId") != turn_id:
            continue
        kind = action["type"]
        if kind == "chat/toolCallReady" and action.get("contributor", {}).get("clientId") == CLIENT_ID:
            result = shout(json.loads(action["toolInput"]))
            connection.dispatch(chat, {
                "type": "chat/toolCallComplete", "turnId": turn_id, "toolCallId": action["toolCallId"],
                "result": {"success": True, "pastTenseMessage": "Shouted",
                           "content": [{"type": "text", "text": result}]}})
        elif kind == "chat/responsePart" and action["part"]["kind"] == "markdown":
            reply[action["part"]["id"]] = action["part"]["content"]
        elif kind == "chat/delta":
            reply[action["partId"]] = reply.get(action["partId"], "") + action["content"]
        elif kind == "chat/turnComplete":
            return "".join(reply.values())
        elif kind == "chat/error":
            raise RequestFailed(f"The turn failed: {action['error']['message']}")
        elif kind == "chat/turnCancelled":
            raise RequestFailed("The turn was cancelled.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="the host's AHP socket, e.g. ws://127.0.0.1:8000/ahp")
    parser.add_argument("token", help="an API token of the host (make run prints one)")
    parser.add_argument("--text", default="hello from the client", help="what the tool is asked to shout")
    args = parser.parse_args()

    with connect(args.url, additional_headers={"Authorization": f"Bearer {args.token}"}) as ws:
        connection = Connection(ws)
        connection.request("initialize", {"channel": "ahp-root://", "protocolVersions": [PROTOCOL_VERSION],
                                          "clientId": CLIENT_ID})
        # The client names the session: a new UUID. createSession answers null once it exists.
        session = f"ahp-session:/{uuid.uuid4()}"
        connection.request("createSession", {"channel": session, "provider": "echo"})
        chat = connection.request("subscribe", {"channel": session})["snapshot"]["state"]["defaultChat"]
        connection.applied(connection.dispatch(session, {
            "type": "session/activeClientSet", "activeClient": {"clientId": CLIENT_ID, "tools": [SHOUT]}}))
        connection.request("subscribe", {"channel": chat})
        # The model sees the tool as <clientId>__<name>; the echo agent calls what a /call line names.
        call = f"/call {CLIENT_ID}__{SHOUT['name']} {json.dumps({'text': args.text})}"
        print(run_turn(connection, chat, call))
        connection.request("disposeSession", {"channel": session})
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RequestFailed as failed:
        sys.exit(str(failed))
    except InvalidStatus as refused:  # the upgrade was answered with an HTTP error: no live token
        sys.exit(f"The host refused the connection (HTTP {refused.response.status_code}); check the token.")
    except TimeoutError:
        sys.exit(f"The host sent nothing for {SECONDS} s.")
    except OSError as unreachable:
        sys.exit(f"Could not reach the host: {unreachable.strerror or unreachable}.")
