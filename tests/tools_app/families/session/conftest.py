"""Session tools are called the way a turn calls them: through the chat's catalog snapshot
(input checked against the offered schema), with the context the runtime hands an executor."""
import json
import uuid

import pytest

from agents.providers.echo import EchoProvider
from agents.registry import PROVIDERS
from sessions_app import actions
from sessions_app.models import Session
from tools_app.catalog.host_tools import REGISTRY
from tools_app.catalog.loader import catalog_for_chat
from tools_app.runtime.context import ToolCallContext
from tools_app.runtime.toolbox import ChatToolbox


class Place:
    """A session (made by a client, as a person would), its default chat and a running turn."""

    def __init__(self, people, role="member", provider="echo", parent=None, folders=()):
        self.people = people
        self.principal = people.principal(role)
        self.session = actions.do_create_session(self.principal, uuid.uuid4(), provider, list(folders),
                                                 parent=parent)
        self.chat = self.session.chats.get(is_default=True)
        self.turn = actions.do_start_turn(self.principal, self.chat, uuid.uuid4(), "working")

    def refresh(self):
        self.session = Session.objects.get(pk=self.session.pk)
        return self

    def context(self, principal=None):
        return ToolCallContext(principal or ChatToolbox(self.turn).principal(), self.session, self.chat, self.turn,
                               "call")

    def call(self, name, principal=None, **arguments):
        """The tool's text as the model reads it (JSON decoded), or Refused raised."""
        binding = catalog_for_chat(self.chat).check_input(name, arguments)
        return decoded(binding.tool.executor(self.context(principal), arguments))


def decoded(text):
    return json.loads(text) if isinstance(text, str) and text[:1] in "{[" else text


def sessionless(name, principal, **arguments):
    return decoded(REGISTRY.get(name).executor(ToolCallContext(principal, None, None, None, ""), arguments))


@pytest.fixture
def place(acme):
    return Place(acme)


@pytest.fixture
def make_place(acme):
    return lambda **kw: Place(kw.pop("people", acme), **kw)


class FolderPerChatEcho(EchoProvider):
    """An echo agent that keeps a folder per chat, with a settings schema of its own."""

    id = "echo-worktree"
    display_name = "Echo (worktrees)"
    folder_per_chat = True
    models = tuple({"id": f"wt-{i}", "provider": "echo-worktree", "name": f"Worktree {i}"} for i in range(7))
    config_schema = {"type": "object", "properties": {"model": {"type": "string"},
                                                      "isolation": {"enum": ["folder", "worktree"]},
                                                      "effort": {"enum": ["low", "high"]}},
                     "additionalProperties": False}


@pytest.fixture
def worktree_agent():
    PROVIDERS[FolderPerChatEcho.id] = FolderPerChatEcho()
    yield FolderPerChatEcho.id
    PROVIDERS.pop(FolderPerChatEcho.id, None)
