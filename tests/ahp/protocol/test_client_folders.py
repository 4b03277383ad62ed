"""Client-dispatchable working directories, a client tool's partial content and the customization
toggle, over real sockets: session|chat/workingDirectorySet|Removed, chat/toolCallContentChanged,
session/customizationToggled."""
import pytest

from .harness import AhpClient, default_chat
from .test_client_tools import call_open_file, complete, setup


@pytest.fixture
def member(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "member-client") as client:
        yield client


@pytest.fixture
def folders(workspace):
    made = []
    for name in ("app", "lib"):
        (workspace / name).mkdir()
        made.append((workspace / name).as_uri())
    return made


def test_a_client_adds_and_removes_a_sessions_working_directory(member, folders):
    app, lib = folders
    session = member.create_session(workingDirectories=[app])
    member.subscribe(session)
    member.dispatch(session, {"type": "session/workingDirectorySet", "directory": lib})
    assert member.action("session/workingDirectorySet")["action"] == {
        "type": "session/workingDirectorySet", "directory": lib}
    assert member.subscribe(session)["workingDirectories"] == [app, lib]
    member.dispatch(session, {"type": "session/workingDirectorySet", "directory": lib})  # already there: no-op
    member.action("session/workingDirectorySet")
    assert member.subscribe(session)["workingDirectories"] == [app, lib]
    member.dispatch(session, {"type": "session/workingDirectoryRemoved", "directory": app})
    assert member.action("session/workingDirectoryRemoved")["action"] == {
        "type": "session/workingDirectoryRemoved", "directory": app}
    assert member.subscribe(session)["workingDirectories"] == [lib]


@pytest.mark.parametrize("directory, reason", [
    ("file:///etc", "/etc is outside this tenant's workspace root."),
    (7, "session/workingDirectorySet needs a directory: a URI of at most 1000 characters."),
])
def test_a_folder_outside_the_tenants_root_is_refused(member, folders, directory, reason):
    session = member.create_session(workingDirectories=[folders[0]])
    member.subscribe(session)
    member.dispatch(session, {"type": "session/workingDirectorySet", "directory": directory})
    assert member.action("session/workingDirectorySet", rejected=True)["rejectionReason"] == reason
    assert member.subscribe(session)["workingDirectories"] == [folders[0]]


def test_a_folder_reached_through_a_link_is_refused(member, folders, workspace, tmp_path):
    (workspace / "out").symlink_to(tmp_path)
    session = member.create_session(workingDirectories=[folders[0]])
    member.subscribe(session)
    member.dispatch(session, {"type": "session/workingDirectorySet", "directory": (workspace / "out").as_uri()})
    assert member.action("session/workingDirectorySet", rejected=True)["rejectionReason"] == (
        f"{workspace / 'out'} is outside this tenant's workspace root.")


def test_a_chat_works_in_one_of_its_sessions_folders(member, folders):
    app, lib = folders
    session = member.create_session(workingDirectories=[app, lib])
    chat = default_chat(member, session)
    member.subscribe(chat)
    assert "workingDirectories" not in member.subscribe(chat)
    member.dispatch(chat, {"type": "chat/workingDirectorySet", "directory": lib})
    assert member.action("chat/workingDirectorySet")["action"] == {"type": "chat/workingDirectorySet", "directory": lib}
    assert member.subscribe(chat)["workingDirectories"] == [lib]
    # One folder per chat here: another takes its place, the old one leaving first.
    member.dispatch(chat, {"type": "chat/workingDirectorySet", "directory": app})
    assert member.action("chat/workingDirectoryRemoved")["action"]["directory"] == lib
    assert member.action("chat/workingDirectorySet")["action"]["directory"] == app
    assert member.subscribe(chat)["workingDirectories"] == [app]
    member.dispatch(chat, {"type": "chat/workingDirectoryRemoved", "directory": app})
    assert member.action("chat/workingDirectoryRemoved")["action"] == {
        "type": "chat/workingDirectoryRemoved", "directory": app}
    assert "workingDirectories" not in member.subscribe(chat)
    assert member.subscribe(session)["workingDirectories"] == [app, lib]  # the session keeps it


def test_removing_a_sessions_folder_takes_it_from_its_chats(member, folders):
    app, lib = folders
    session = member.create_session(workingDirectories=[app, lib])
    chat = default_chat(member, session)
    member.subscribe(chat)
    member.dispatch(chat, {"type": "chat/workingDirectorySet", "directory": lib})
    member.action("chat/workingDirectorySet")
    member.dispatch(session, {"type": "session/workingDirectoryRemoved", "directory": lib})
    assert member.action("chat/workingDirectoryRemoved")["action"]["directory"] == lib
    member.action("session/workingDirectoryRemoved")
    assert "workingDirectories" not in member.subscribe(chat)


def test_a_chat_folder_must_be_its_sessions(member, folders):
    app, lib = folders
    session = member.create_session(workingDirectories=[app])
    chat = default_chat(member, session)
    member.subscribe(chat)
    member.dispatch(chat, {"type": "chat/workingDirectorySet", "directory": lib})
    assert member.action("chat/workingDirectorySet", rejected=True)["rejectionReason"] == (
        f"{lib} is not a working directory of this session; add it with session/workingDirectorySet first.")
    member.dispatch(chat, {"type": "chat/workingDirectorySet", "directory": "file:///etc"})
    assert member.action("chat/workingDirectorySet", rejected=True)["rejectionReason"] == (
        "/etc is outside this tenant's workspace root.")


@pytest.mark.parametrize("action_type, target", [
    ("session/workingDirectorySet", "session"), ("session/workingDirectoryRemoved", "session"),
    ("chat/workingDirectorySet", "chat"), ("chat/workingDirectoryRemoved", "chat"),
])
def test_a_guest_may_not_change_folders(acme, host, member, folders, action_type, target):
    session = member.create_session(workingDirectories=folders)
    channel = session if target == "session" else default_chat(member, session)
    with AhpClient(host.port, acme.tokens["guest"], "guest-client") as guest:
        guest.subscribe(channel)
        guest.dispatch(channel, {"type": action_type, "directory": folders[1]})
        assert guest.action(action_type, rejected=True)["rejectionReason"] == "acme-guest may not session:folders here"
    assert member.subscribe(session)["workingDirectories"] == folders


def test_an_outsider_of_another_tenant_changes_nothing_and_hears_nothing(globex, host, member, folders):
    session = member.create_session(workingDirectories=folders)
    chat = default_chat(member, session)
    with AhpClient(host.port, globex.tokens["admin"], "outsider") as outsider:
        for channel, action in [(session, {"type": "session/workingDirectoryRemoved", "directory": folders[0]}),
                                (session, {"type": "session/workingDirectorySet", "directory": folders[0]}),
                                (session, {"type": "session/customizationToggled", "id": "x", "enabled": False}),
                                (chat, {"type": "chat/workingDirectorySet", "directory": folders[1]}),
                                (chat, {"type": "chat/toolCallContentChanged", "turnId": session[-36:],
                                        "toolCallId": session[-36:], "content": []})]:
            outsider.dispatch(channel, action)
        outsider.call("ping", {"channel": "ahp-root://"})  # answered after every action before it
        assert not [f for f in outsider.notifications if f.get("method") == "action"]
    assert member.subscribe(session)["workingDirectories"] == folders
    assert "workingDirectories" not in member.subscribe(chat)


def test_the_client_running_a_call_shows_its_partial_content(acme, host):
    alice, ide, session, chat = setup(host, acme)
    with alice, ide:
        turn, start = call_open_file(alice, chat)
        call_id = ide.action("session/inputNeededSet")["action"]["request"]["toolCall"]["toolCallId"]
        ide.subscribe(chat)
        content = [{"type": "text", "text": "opening..."}]
        ide.dispatch(chat, {"type": "chat/toolCallContentChanged", "turnId": turn, "toolCallId": call_id,
                            "content": content})
        assert alice.action("chat/toolCallContentChanged")["action"] == {
            "type": "chat/toolCallContentChanged", "turnId": turn, "toolCallId": call_id, "content": content}
        running = alice.subscribe(chat)["activeTurn"]["responseParts"][0]["toolCall"]
        assert (running["status"], running["content"]) == ("running", content)
        # Only the call's own client, and only while it runs.
        alice.dispatch(chat, {"type": "chat/toolCallContentChanged", "turnId": turn, "toolCallId": call_id,
                              "content": content})
        assert alice.action("chat/toolCallContentChanged", rejected=True)["rejectionReason"] == (
            f"Tool call {call_id} belongs to ide, not alice.")
        ide.dispatch(chat, {"type": "chat/toolCallContentChanged", "turnId": turn, "toolCallId": call_id,
                            "content": "nope"})
        assert ide.action("chat/toolCallContentChanged", rejected=True)["rejectionReason"] == (
            "chat/toolCallContentChanged needs content: an array of content items; a text item's text is a string.")
        complete(ide, chat, turn, call_id, text="opened")
        assert alice.reply_to(turn) == "opened"
        ide.dispatch(chat, {"type": "chat/toolCallContentChanged", "turnId": turn, "toolCallId": call_id,
                            "content": content})
        assert ide.action("chat/toolCallContentChanged", rejected=True)["rejectionReason"] == (
            f"Tool call {call_id} is not running.")
        done = alice.subscribe(chat)["turns"][-1]["responseParts"][0]["toolCall"]
        assert done["content"] == [{"type": "text", "text": "opened"}]


def test_a_guest_may_not_stream_a_calls_content(acme, host):
    alice, ide, session, chat = setup(host, acme)
    with alice, ide, AhpClient(host.port, acme.tokens["guest"], "ide") as guest_ide:
        turn, start = call_open_file(alice, chat)
        guest_ide.subscribe(chat)
        guest_ide.dispatch(chat, {"type": "chat/toolCallContentChanged", "turnId": turn,
                                  "toolCallId": start["toolCallId"], "content": []})
        assert guest_ide.action("chat/toolCallContentChanged", rejected=True)["rejectionReason"] == (
            "acme-guest may not chat:tool here")


def test_a_customization_toggle_is_refused_the_host_keeps_none(member):
    session = member.create_session()
    member.subscribe(session)
    member.dispatch(session, {"type": "session/customizationToggled", "id": "plugin-1", "enabled": False})
    assert member.action("session/customizationToggled", rejected=True)["rejectionReason"] == (
        "This host keeps no session customizations to toggle; a client's own customizations change with "
        "session/activeClientSet.")
