"""A person at a socket driving the echo agent: `/call <tool> <json>` runs one tool."""
import json

from sessions_app.models import Chat, Session

from ...ahp.protocol.harness import AhpClient, default_chat


class Desk:
    def __init__(self, host, people, role="member", client_id="alice", folders=()):
        self.client = AhpClient(host.port, people.tokens[role], client_id)
        self.session_uri = self.client.create_session(**({"workingDirectories": list(folders)} if folders else {}))
        self.chat_uri = default_chat(self.client, self.session_uri)
        self.client.subscribe(self.chat_uri)

    @property
    def session(self):
        return Session.objects.get(id=self.session_uri.split("/")[-1])

    @property
    def chat(self):
        return Chat.objects.get(id=self.chat_uri.split("/")[-1])

    def call(self, tool, arguments=None):
        return self.client.reply_to(self.start(tool, arguments))

    def start(self, tool, arguments=None):
        return self.client.start_turn(self.chat_uri, f"/call {tool} {json.dumps(arguments or {})}")

    def close(self):
        self.client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
