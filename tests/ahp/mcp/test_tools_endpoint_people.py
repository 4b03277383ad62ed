"""Every endpoint token acts as the person who asked for it, with their grants as they are now,
and stops with their token, their person or their membership; the host's agent acts only
within the turn it answers."""
import threading
import time

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from ahp.mcp.endpoint import ANOTHER_PERSONS_TURN, NO_ENDPOINT, NO_TURN_FOR_AGENT
from grants.actions import do_add_member, do_deactivate_person, do_mint_token, do_remove_member, do_revoke_token
from grants.models import Principal
from sessions_app.actions import do_open_tools_endpoint
from sessions_app.events.sockets import HEARTBEAT_SECONDS
from sessions_app.models import Session, ToolCall

from ...ahp.protocol.harness import AhpClient, default_chat
from ...conftest import manage
from .helpers import tools_endpoint, with_mcp
from .test_tools_endpoint import IDE_TOOL, call, raw_post

LISTING = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def person(people, username, role="member"):
    do_add_member(people.tenant, username, role)
    someone = get_user_model().objects.get(username=username)
    return someone, do_mint_token(people.tenant, person=someone, name=username)[1]


def session_id(uri):
    return uri.split("/")[-1]


def test_a_member_with_an_endpoint_cannot_delete_another_members_session(acme, host, host_tools):
    carol, carol_token = person(acme, "acme-carol")
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        workspace, target = alice.create_session(), alice.create_session()
        admins = tools_endpoint(host.port, acme.tokens["admin"], workspace).json()
        carols = tools_endpoint(host.port, carol_token, workspace).json()
        assert carols["url"] == admins["url"] and carols["token"] != admins["token"]
        assert call(admins["url"], admins["token"], "whoami", {}).content[0].text.startswith("acme-admin in turn")
        refused = call(carols["url"], carols["token"], "delete_session", {"session": target})
        assert refused.isError is True and refused.content[0].text == "Only the session's owner can delete it."
        assert Session.objects.filter(id=session_id(target)).exists()
        audited = ToolCall.objects.get(tool_name="delete_session")
        assert audited.turn.sender == carol


@pytest.mark.parametrize("ending", ["revoke the token", "deactivate the person", "remove the membership",
                                    "demote to guest"])
def test_an_endpoint_token_stops_with_its_token_person_or_membership(acme, host, ending):
    carol, carol_token = person(acme, "acme-carol")
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        session = alice.create_session()
        endpoint = tools_endpoint(host.port, carol_token, session).json()
        assert raw_post(endpoint["url"], endpoint["token"], LISTING).status_code == 200
        if ending == "revoke the token":
            do_revoke_token(acme.tenant, "acme-carol")
        elif ending == "deactivate the person":
            do_deactivate_person(carol)
        elif ending == "remove the membership":
            do_remove_member(acme.tenant, carol)
        else:
            do_add_member(acme.tenant, "acme-carol", "guest")
        response = raw_post(endpoint["url"], endpoint["token"], LISTING)
        assert (response.status_code, response.json()["error"]["message"]) == (404, NO_ENDPOINT)


@pytest.mark.e2e  # manage.py in a process of its own: on the embedded host no channel layer reaches it
def test_an_endpoint_token_stops_with_a_demotion_made_in_another_process(acme, host):
    _, carol_token = person(acme, "acme-carol")
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        session = alice.create_session()
        endpoint = tools_endpoint(host.port, carol_token, session).json()
        assert raw_post(endpoint["url"], endpoint["token"], LISTING).status_code == 200
        assert manage("addmember", "acme", "acme-carol", "--role", "guest") == "acme-carol is guest in acme\n"
        deadline = time.monotonic() + HEARTBEAT_SECONDS
        response = raw_post(endpoint["url"], endpoint["token"], LISTING)
        # The very next request on the embedded host; with a shared layer, within the endpoint's
        # bound on a change made in another process (ahp.mcp.endpoint).
        while settings.REDIS_URL and response.status_code == 200 and time.monotonic() < deadline:
            time.sleep(0.1)
            response = raw_post(endpoint["url"], endpoint["token"], LISTING)
        assert (response.status_code, response.json()["error"]["message"]) == (404, NO_ENDPOINT)


def test_a_person_token_never_acts_in_another_persons_running_turn(acme, host, host_tools):
    _, carol_token = person(acme, "acme-carol")
    with (AhpClient(host.port, acme.tokens["member"], "alice") as alice,
          AhpClient(host.port, acme.tokens["member"], "ide") as ide):
        session = alice.create_session()
        chat = default_chat(alice, session)
        alice.subscribe(chat)
        ide.subscribe(session)
        ide.dispatch(session, {"type": "session/activeClientSet",
                               "activeClient": {"clientId": "ide", "tools": [IDE_TOOL]}})
        ide.action("session/activeClientSet")
        running = alice.start_turn(chat, '/call ide__open_file {"path": "README.md"}')
        ide.action("session/inputNeededSet")
        carols = tools_endpoint(host.port, carol_token, session).json()
        refused = call(carols["url"], carols["token"], "whoami", {})
        assert refused.isError is True and refused.content[0].text == ANOTHER_PERSONS_TURN
        assert not ToolCall.objects.filter(turn_id=running, tool_name="whoami").exists()


def test_the_hosts_agent_acts_only_within_a_turn_as_its_sender(acme, host, host_tools):
    with (AhpClient(host.port, acme.tokens["member"], "alice") as alice,
          AhpClient(host.port, acme.tokens["member"], "ide") as ide):
        session = alice.create_session()
        chat = default_chat(alice, session)
        agent = do_open_tools_endpoint(Principal.root(acme.tenant), Session.objects.get(id=session_id(session)))
        url = f"http://127.0.0.1:{host.port}{agent.path}"
        idle = call(url, agent.token, "whoami", {})
        assert idle.isError is True and idle.content[0].text == NO_TURN_FOR_AGENT
        ide.subscribe(session)
        ide.dispatch(session, {"type": "session/activeClientSet",
                               "activeClient": {"clientId": "ide", "tools": [IDE_TOOL]}})
        ide.action("session/activeClientSet")
        running = alice.start_turn(chat, '/call ide__open_file {"path": "README.md"}')
        ide.action("session/inputNeededSet")
        assert call(url, agent.token, "whoami", {}).content[0].text == f"acme-member in turn {running}"


def test_asking_again_answers_the_same_token_from_any_thread(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "alice") as alice:
        session = alice.create_session()
        answers = []
        askers = [threading.Thread(target=lambda: answers.append(
            tools_endpoint(host.port, acme.tokens["member"], session).json()["token"])) for _ in range(4)]
        for asker in askers:
            asker.start()
        for asker in askers:
            asker.join(20)
        assert len(answers) == 4 and len(set(answers)) == 1
        assert with_mcp(f"http://127.0.0.1:{host.port}/ahp-mcp/{session_id(session)}", answers[0],
                        lambda s: s.list_tools()).tools
