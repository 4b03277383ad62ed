"""send_message, create_session, create_chat, rename_chat, archive_chat, delete_session, move_session."""
import uuid

import pytest

from kernel.refusals import Refused
from sessions_app import actions, state
from sessions_app.models import Chat, ChatBackend, PendingMessage, Session, Turn
from tools_app.catalog.validation import ToolRefusal
from tools_app.families.session.links import open_link
from tools_app.models import HostConfig

from .conftest import Place


def refusal(place, name, **arguments):
    with pytest.raises(Refused) as refused:
        place.call(name, **arguments)
    return refused.value.sentence


def test_send_message_starts_a_turn_in_a_free_chat_and_queues_in_a_busy_one(acme, place):
    other = Place(acme)
    actions.do_end_turn(other.turn.id, response_text="done")
    sent = place.call("send_message", session=open_link(other.session), message="hello")
    assert sent["delivery"] == "started"
    turn = Turn.objects.get(pk=sent["turnId"])
    assert (turn.chat_id, turn.text, turn.sender) == (other.chat.pk, "hello", acme.member)
    queued = place.call("send_message", session=other.session.uri, message="next")
    assert queued["delivery"] == "queued"
    assert PendingMessage.objects.get(pk=queued["messageId"]).sender_chat == place.chat


def test_send_message_refuses_the_calling_chat(place):
    assert refusal(place, "send_message", session=place.session.uri, message="me?") == (
        "send_message cannot message the chat it runs in.")


def test_create_session_independent_is_nested_below_the_caller_and_started(acme, place, workspace):
    made = place.call("create_session", relationship="independent", prompt="do it", title="Child",
                      workspace=f"{workspace}/child")
    child = Session.objects.get(pk=made["session"].split("/")[-1])
    assert (child.parent, child.root_id, child.depth, child.title, child.owner) == (
        place.session, place.session.pk, 1, "Child", acme.member)
    assert child.working_directories == [f"file://{workspace}/child"] and child.config == {"isolation": "folder"}
    assert made["openLink"] == open_link(child)
    assert Turn.objects.get(chat__session=child).text == "do it"


def test_create_session_defaults_the_agent_and_validates_config_first(place, worktree_agent, no_agent_programs):
    by_model = place.call("create_session", relationship="independent", prompt="p", title="t", model="wt-3")
    assert by_model["agent"] == worktree_agent
    assert place.call("create_session", relationship="independent", prompt="p", title="t")["agent"] == "echo"
    before = Session.objects.count()
    assert refusal(place, "create_session", relationship="independent", prompt="p", title="t",
                   agent=worktree_agent, config={"effort": "max"}) == (
        "Invalid config for agent echo-worktree at /effort: 'max' is not one of ['low', 'high']")
    # The call is checked against the schema this session was offered: its `agent` enum.
    with pytest.raises(ToolRefusal) as refused:
        place.call("create_session", relationship="independent", prompt="p", title="t", agent="nope")
    assert refused.value.sentence == ("Invalid input for create_session at /agent: 'nope' is not one of "
                                      "['echo', 'echo-worktree']")
    assert Session.objects.count() == before


def test_the_hosts_isolation_and_model_win_and_unnamed_settings_come_from_the_caller(make_place, worktree_agent,
                                                                                   workspace):
    caller = make_place(provider=worktree_agent)
    Session.objects.filter(pk=caller.session.pk).update(config={"effort": "low", "model": "wt-1"})
    caller.refresh()
    made = caller.call("create_session", relationship="independent", prompt="p", title="t", agent=worktree_agent,
                       workspace=f"{workspace}/x", worktree=True, config={"isolation": "folder", "model": "wt-2"},
                       model="wt-4")
    config = Session.objects.get(pk=made["session"].split("/")[-1]).config
    assert config == {"effort": "low", "model": "wt-4", "isolation": "worktree"}
    inherited = caller.call("create_session", relationship="independent", prompt="p", title="t")
    assert Session.objects.get(pk=inherited["session"].split("/")[-1]).config == {"effort": "low", "model": "wt-1"}
    elsewhere = caller.call("create_session", relationship="independent", prompt="p", title="t", agent="echo")
    assert Session.objects.get(pk=elsewhere["session"].split("/")[-1]).config == {}


def test_create_session_current_session_makes_a_chat_on_the_named_backend(place, worktree_agent):
    made = place.call("create_session", relationship="currentSession", prompt="help", title="Helper",
                      agent=worktree_agent)
    chat = Chat.objects.get(pk=made["chat"].split("/")[-1])
    assert (chat.session, chat.title, ChatBackend.objects.get(chat=chat).provider) == (
        place.session, "Helper", worktree_agent)
    assert Turn.objects.get(chat=chat).text == "help"


def test_create_chat_adds_a_chat_here_or_to_a_named_session(acme, place):
    here = place.call("create_chat", title="Notes")
    assert Chat.objects.get(pk=here["chat"].split("/")[-1]).session == place.session
    other = Place(acme)
    there = place.call("create_chat", session=other.session.uri, title="Review", prompt="look")
    chat = Chat.objects.get(pk=there["chat"].split("/")[-1])
    assert chat.session == other.session and Turn.objects.get(chat=chat).text == "look"


def test_rename_chat_names_the_session_by_its_main_chat(place):
    side = Chat.objects.get(pk=place.call("create_chat", title="Side")["chat"].split("/")[-1])
    place.call("rename_chat", title="Main work")
    assert place.refresh().session.title == "Main work"
    place.call("rename_chat", chat=open_link(place.session, side), title="Side work")
    assert Chat.objects.get(pk=side.pk).title == "Side work" and place.refresh().session.title == "Main work"


def test_archive_chat_archives_a_nested_chat_alone_or_a_whole_session(acme, place):
    side = Chat.objects.get(pk=place.call("create_chat", title="Side")["chat"].split("/")[-1])
    place.call("archive_chat", chat=open_link(place.session, side))
    assert Chat.objects.get(pk=side.pk).archived and not place.refresh().session.archived
    other = Place(acme)
    place.call("archive_chat", chat=open_link(other.session))
    assert Session.objects.get(pk=other.session.pk).archived
    third = Place(acme)
    place.call("archive_chat", session=third.session.uri)
    assert Session.objects.get(pk=third.session.pk).archived


def test_archive_chat_refuses_its_own_chat_and_its_sessions_main_chat(acme, place):
    side = Chat.objects.get(pk=place.call("create_chat", title="Side")["chat"].split("/")[-1])
    assert refusal(place, "archive_chat", chat=place.chat.uri) == "archive_chat cannot archive the chat it runs in."
    place.chat = side  # now calling from the side chat
    assert refusal(place, "archive_chat", session=place.session.uri) == (
        "archive_chat cannot archive its own session's main chat.")


def test_archive_chat_asks_the_mark_grants(acme, place):
    other = Place(acme)
    with pytest.raises(Refused) as refused:
        place.call("archive_chat", principal=acme.principal("guest"), session=other.session.uri)
    assert refused.value.sentence == "acme-guest may not session:mark here"
    side = actions.do_create_chat(other.principal, other.session, "22222222-2222-2222-2222-222222222222", "s")
    with pytest.raises(Refused) as refused:
        place.call("archive_chat", principal=acme.principal("guest"), chat=open_link(other.session, side))
    assert refused.value.sentence == "acme-guest may not chat:mark here"


def test_delete_session_only_by_the_owner_and_never_its_own(acme, place):
    mine = Place(acme)
    theirs = Place(acme, role="admin")
    assert refusal(place, "delete_session", session=place.session.uri) == (
        "delete_session cannot delete the session it runs in.")
    assert refusal(place, "delete_session", session=theirs.session.uri) == "Only the session's owner can delete it."
    assert place.call("delete_session", session=mine.session.uri) == {"deleted": mine.session.uri}
    assert not Session.objects.filter(pk=mine.session.pk).exists()
    theirs.call("delete_session", session=place.session.uri)  # admin holds session:*
    assert not Session.objects.filter(pk=place.session.pk).exists()


def test_delete_session_without_a_turn_acts_as_the_calling_sessions_owner(acme, place):
    from tools_app.catalog.host_tools import REGISTRY
    from tools_app.runtime.context import ToolCallContext

    theirs = Place(acme, role="admin")
    context = ToolCallContext(acme.principal("admin"), place.session, place.chat, None, "")
    with pytest.raises(Refused) as refused:
        REGISTRY.get("delete_session").executor(context, {"session": theirs.session.uri})
    assert refused.value.sentence == "Only the session's owner can delete it."


def test_move_session_nests_reorders_and_frees(acme, place):
    a, b, c = (Place(acme) for _ in range(3))
    place.call("move_session", session=a.session.uri, into=place.session.uri)
    place.call("move_session", session=b.session.uri, relationship="currentSession")
    moved = place.call("move_session", session=c.session.uri, into=place.session.uri, after=a.session.uri)
    assert moved["parent"] == place.session.uri
    order = sorted(Session.objects.filter(parent=place.session), key=lambda s: s.placement.position)
    assert order == [a.session, c.session, b.session]
    place.call("move_session", session=b.session.uri, after=a.session.uri)
    order = sorted(Session.objects.filter(parent=place.session), key=lambda s: s.placement.position)
    assert order == [a.session, b.session, c.session]
    grandchild = Place(acme)
    place.call("move_session", session=grandchild.session.uri, into=a.session.uri)
    assert Session.objects.get(pk=grandchild.session.pk).depth == 2
    place.call("move_session", session=a.session.uri, relationship="independent")
    freed = Session.objects.get(pk=a.session.pk)
    assert (freed.parent, freed.depth, freed.root_id) == (None, 0, a.session.pk)
    assert Session.objects.get(pk=grandchild.session.pk).root_id == a.session.pk


def test_move_session_refusals(acme, place):
    a, b = Place(acme), Place(acme)
    place.call("move_session", session=a.session.uri, into=place.session.uri)
    assert refusal(place, "move_session", session=place.session.uri, into=a.session.uri) == (
        "A session cannot move into itself or a session nested in it.")
    assert refusal(place, "move_session", session=b.session.uri, after=a.session.uri) == (
        "Only a nested session can be reordered; name a session to move it into.")
    assert refusal(place, "move_session", session=a.session.uri, into=place.session.uri, after=b.session.uri) == (
        f"{b.session.uri} is not nested in the session this one moves into.")
    assert refusal(place, "move_session", session=a.session.uri) == (
        'Say where the session goes: into, after, or relationship "independent".')
    assert refusal(place, "move_session", session=b.session.uri, relationship="currentSession",
                   into=a.session.uri) == 'relationship "currentSession" nests it into this session; leave out into.'
    assert refusal(place, "move_session", session=b.session.uri, relationship="independent",
                   into=a.session.uri) == "A session made independent has no place to go into or after."
    # The boolean `independent` of old is no shape the tool knows: it moves nothing.
    assert refusal(place, "move_session", session=b.session.uri, independent=True) == (
        'Say where the session goes: into, after, or relationship "independent".')
    HostConfig.objects.filter(tenant=acme.tenant).update(chat_moves_enabled=False)
    HostConfig.for_tenant(acme.tenant)
    HostConfig.objects.filter(tenant=acme.tenant).update(chat_moves_enabled=False)
    assert refusal(place, "move_session", session=a.session.uri, relationship="independent") == (
        "Moving chats and sessions is turned off (chatMoves.enabled is false).")


def test_the_new_work_takes_the_calling_chats_model_running_turn_first(make_place, worktree_agent):
    caller = make_place(provider=worktree_agent)
    Session.objects.filter(pk=caller.session.pk).update(config={"model": "wt-1"})
    caller.refresh()
    actions.do_end_turn(caller.turn.id, response_text="done")
    actions.do_start_turn(caller.principal, caller.chat, uuid.uuid4(), "older", model="wt-2")
    Turn.objects.filter(text="older").update(state="complete")
    caller.turn = actions.do_start_turn(caller.principal, caller.chat, uuid.uuid4(), "now", model="wt-3")
    made = caller.call("create_session", relationship="independent", prompt="p", title="t")
    session = Session.objects.get(pk=made["session"].split("/")[-1])
    assert session.config == {"model": "wt-3"}
    assert state.chat_state(session.chats.get())["activeTurn"]["message"]["model"] == {"id": "wt-3"}
    Turn.objects.filter(pk=caller.turn.pk).update(model="")
    caller.turn.model = ""
    made = caller.call("create_session", relationship="independent", prompt="p", title="t")
    assert Session.objects.get(pk=made["session"].split("/")[-1]).config == {"model": "wt-2"}
    # The message being composed in the calling chat names a model: it comes before the last turn's.
    actions.do_set_chat_draft(caller.principal, caller.chat, {"text": "next", "model": {"id": "wt-4"}})
    made = caller.call("create_session", relationship="independent", prompt="p", title="t")
    assert Session.objects.get(pk=made["session"].split("/")[-1]).config == {"model": "wt-4"}


def test_create_session_current_session_applies_its_config_to_the_new_chat(make_place, worktree_agent):
    caller = make_place(provider=worktree_agent)
    Turn.objects.filter(pk=caller.turn.pk).update(model="wt-4")
    caller.turn.model = "wt-4"
    made = caller.call("create_session", relationship="currentSession", prompt="help", title="Helper",
                       config={"effort": "high"})
    chat = Chat.objects.get(pk=made["chat"].split("/")[-1])
    assert ChatBackend.objects.get(chat=chat).config == {"effort": "high", "model": "wt-4"}
    first = Turn.objects.get(chat=chat)
    assert state.chat_state(chat)["activeTurn"]["message"]["model"] == {"id": "wt-4"} and first.model == "wt-4"


def test_create_session_without_a_relationship_makes_a_chat_here_as_the_reference_does(place):
    made = place.call("create_session", prompt="help", title="Helper")
    assert made["relationship"] == "currentSession"
    chat = Chat.objects.get(pk=made["chat"].split("/")[-1])
    assert (chat.session, chat.origin_kind) == (place.session, "tool")


def test_a_session_a_tool_creates_is_the_calling_sessions_owners_whoever_sent_the_turn(acme, make_place):
    place = make_place(role="admin")
    made = place.call("create_session", principal=acme.principal("member"), relationship="independent",
                      prompt="do it", title="Child")
    child = Session.objects.get(id=made["session"].removeprefix("ahp-session:/"))
    assert child.owner == acme.admin and child.owner != acme.member
