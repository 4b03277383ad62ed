"""A session's start and end as the doors make them, with no signal in between: the start
refuses an agent there is not and keeps the tenant's MCP servers; the end, once committed,
tells every agent to forget the session."""
import uuid

import pytest

from agents.registry import PROVIDERS
from kernel.refusals import Refused
from tools_app.models import SessionMcpServers
from tools_app.sessions import do_end_session, do_start_session


def test_the_start_refuses_an_unknown_agent_and_captures_the_servers(acme, db):
    with pytest.raises(Refused) as refused:
        do_start_session(acme.principal("member"), uuid.uuid4(), "nobody")
    assert refused.value.sentence == "No agent for provider nobody."
    session = do_start_session(acme.principal("member"), uuid.uuid4())
    assert SessionMcpServers.objects.filter(session=session).exists()


class Forgetful:
    id = "forgetful"

    def __init__(self):
        self.forgotten = []

    def forget(self, session_id):
        self.forgotten.append(session_id)


def test_the_end_makes_each_agent_forget_the_session_after_commit(acme, transactional_db):
    agent = PROVIDERS["forgetful"] = Forgetful()
    try:
        session_id = uuid.uuid4()
        do_end_session(acme.principal("member"), do_start_session(acme.principal("member"), session_id))
    finally:
        PROVIDERS.pop("forgetful")
    assert agent.forgotten == [session_id]
