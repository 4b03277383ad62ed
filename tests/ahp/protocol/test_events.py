"""Every state change a client can see, held to Zulip's rules (zerver/tests/test_events.py):
each case states how many actions its change publishes, the change must change some state, every
envelope must fit the protocol's types (the JSON Schema of AHP 1.1 kept beside these tests), and a
subscriber's snapshot with the published actions reduced onto it must equal a fresh snapshot.
A change that alters a snapshot without publishing the action saying so leaves every client's
copy stale; one that publishes more than it says floods them; this is where either shows."""
import json
import time
import uuid

import pytest

from sessions_app import actions as session_actions
from sessions_app.models import ActionLog, Chat
from tools_app.families.comments.models import FEEDBACK_KEY
from tools_app.families.mcp_servers import actions as mcp_actions

from .harness import AhpClient, default_chat
from .reducer import chat_routes, reduce, reduce_chat_moved, reduce_root, reduce_session_list
from .wire_schema import violations

ROOT = "ahp-root://"


def snapshot(client, channel):
    answer = client.call("subscribe", {"channel": channel})["snapshot"]
    return answer["state"], answer["fromSeq"]


def logged_between(channel, after, upto):
    rows = ActionLog.objects.filter(channel=channel, seq__gt=after, seq__lte=upto).order_by("seq")
    return [row.envelope for row in rows]


def without(state, keys):
    return {k: v for k, v in state.items() if k not in keys}


def misfits(name, frames):
    """Each frame the schema's definition `name` refuses, with what it refuses."""
    return [(frame, found) for frame in frames if (found := violations(name, frame))]


class Watch:
    """The snapshots of `channels` taken now, to be held against fresh ones after a change."""

    def __init__(self, client, *channels):
        self.client = client
        self.before = {channel: snapshot(client, channel) for channel in channels}
        self.sessions = self.session_list()

    def session_list(self):
        return {s["resource"]: s for s in self.client.call("listSessions", {"limit": 100})["items"]}

    def assert_consistent(self, actions, only=None, but=(), changes=True, uncounted=()):
        """`actions`: how many actions the change logged on the channels checked (`only`, or all),
        but those of the types `uncounted` (a shell's output, in as many chunks as the PTY reads);
        `changes`: whether their state must differ from the snapshots taken before; `but`: keys of
        the state left out (a drift owed elsewhere, marked xfail on its own)."""
        published, changed = [], False
        for channel, (state, from_seq) in self.before.items():
            if only is not None and channel != only:
                continue
            fresh, upto = snapshot(self.client, channel)
            envelopes = logged_between(channel, from_seq, upto)
            published += envelopes
            reduced = reduce(channel, state, envelopes)
            # A chat's title moves by session/chatUpdated on its session's channel (held below as
            # the session's `chats`): the protocol has no chat-channel action for it, so the chat
            # channel's copy is compared without it (a chat is named after its first message).
            left_out = (*but, "title") if channel.startswith("ahp-chat:") else but
            assert without(reduced, left_out) == without(fresh, left_out), channel
            changed = changed or fresh != state
        assert misfits("ActionEnvelope", published) == []
        counted = [e["action"]["type"] for e in published if e["action"]["type"] not in uncounted]
        assert len(counted) == actions, " ".join(counted)
        assert changed == changes, "the change left every snapshot as it was" if changes else "a snapshot changed"

    def assert_session_list_consistent(self, timeout=5):
        """The root channel's session list: its notifications are not logged, so read them off
        the socket until the reduced list matches a fresh one (or time runs out); each fits the
        protocol's types."""
        deadline = time.monotonic() + timeout
        while True:
            reduced = list(self.sessions.values())
            heard = [frame for frame in self.client.notifications if frame.get("method", "").startswith("root/session")]
            for frame in heard:
                reduced = reduce_session_list(reduced, frame["method"], frame["params"])
            fresh = self.session_list()
            if {s["resource"]: s for s in reduced} == fresh or time.monotonic() > deadline:
                assert {s["resource"]: s for s in reduced} == fresh
                assert misfits("serverNotification", heard) == []
                return
            try:
                self.client.read(0.2)
            except TimeoutError:
                pass


@pytest.fixture
def member(acme, host):
    with AhpClient(host.port, acme.tokens["member"], "member-client") as client:
        client.subscribe(ROOT)
        yield client


@pytest.fixture
def session(member):
    return member.create_session()


SESSION_ACTIONS = [
    {"type": "session/titleChanged", "title": "Refactor auth"},
    {"type": "session/isArchivedChanged", "isArchived": True},
    {"type": "session/isReadChanged", "isRead": False},  # its creator has read a new session
    {"type": "session/activeClientSet", "activeClient": {"clientId": "member-client", "tools": []}},
    {"type": "session/configChanged", "config": {"model": "echo-1"}},
    {"type": "session/configChanged", "config": {"model": "echo-1"}, "replace": True},
]


@pytest.mark.parametrize("action", SESSION_ACTIONS, ids=lambda a: a["type"] + ("+replace" if a.get("replace") else ""))
def test_a_session_action_reduces_to_the_fresh_snapshot(member, session, action):
    watch = Watch(member, session)
    member.dispatch(session, action)
    member.action(action["type"])
    watch.assert_consistent(actions=1)
    watch.assert_session_list_consistent()


def test_changing_the_default_chat_reduces_to_the_fresh_snapshot(member, session):
    chat = f"ahp-chat:/{uuid.uuid4()}"
    member.call("createChat", {"channel": session, "chat": chat})
    watch = Watch(member, session)
    member.dispatch(session, {"type": "session/defaultChatChanged", "defaultChat": chat})
    member.action("session/defaultChatChanged")
    watch.assert_consistent(actions=1)
    assert member.subscribe(session)["defaultChat"] == chat


def test_removing_an_active_client_reduces_to_the_fresh_snapshot(member, session):
    member.subscribe(session)
    member.dispatch(session, {"type": "session/activeClientSet", "activeClient": {"clientId": "member-client",
                                                                                   "tools": []}})
    member.action("session/activeClientSet")
    watch = Watch(member, session)
    member.dispatch(session, {"type": "session/activeClientRemoved", "clientId": "member-client"})
    member.action("session/activeClientRemoved")
    watch.assert_consistent(actions=1)


def test_a_turn_reduces_to_the_fresh_chat_session_and_list(member, session):
    chat = default_chat(member, session)
    watch = Watch(member, session, chat)
    turn = member.start_turn(chat, "hello")
    member.reply_to(turn)
    # session/titleChanged, session/chatUpdated (title, then status), chat/turnStarted,
    # chat/responsePart, chat/turnComplete
    watch.assert_consistent(actions=6)
    watch.assert_session_list_consistent()


def test_a_config_change_reduces_to_the_fresh_root_snapshot(acme, host):
    with AhpClient(host.port, acme.tokens["root"], "operator") as root:
        watch = Watch(root, ROOT)
        root.dispatch(ROOT, {"type": "root/configChanged", "config": {"advancedTools": True}})
        root.action("root/configChanged")
        watch.assert_consistent(actions=1)


def annotation(annotation_id="a1"):
    return {"id": annotation_id, "resource": "file:///src/app.py", "turnId": "",
            "entries": [{"id": "e1", "text": "Why this name?"}]}


ANNOTATION_ACTIONS = [
    {"type": "annotations/updated", "annotationId": "a1", "resolved": True},
    {"type": "annotations/removed", "annotationId": "a1"},
    {"type": "annotations/entrySet", "annotationId": "a1", "entry": {"id": "e2", "text": "Because."}},
    {"type": "annotations/entryRemoved", "annotationId": "a1", "entryId": "e1"},
]


@pytest.mark.parametrize("action", [{"type": "annotations/set", "annotation": annotation("a2")}, *ANNOTATION_ACTIONS],
                         ids=lambda a: a["type"])
def test_an_annotation_action_reduces_to_the_fresh_snapshot(member, session, action):
    channel = f"{session}/annotations"
    member.subscribe(channel)
    member.dispatch(channel, {"type": "annotations/set", "annotation": annotation()})
    member.action("annotations/set")
    watch = Watch(member, channel)
    member.dispatch(channel, action)
    # Removing an annotation's last entry removes the annotation.
    member.action("annotations/removed" if action["type"] == "annotations/entryRemoved" else action["type"])
    watch.assert_consistent(actions=1)


# Tool families: an agent's tool call in a turn (the echo agent's `/call <tool> <json>`), held
# against the session, its chat, its annotations and the root's session list. -------------------

# A first turn making one host tool call: session/titleChanged, session/chatUpdated (title, then
# status), chat/turnStarted, chat/toolCallStart, chat/toolCallReady, chat/toolCallComplete,
# chat/responsePart, chat/turnComplete.
TURN_WITH_A_CALL = 9
# (family, tool, arguments, what the tool itself publishes on the watched channels)
FAMILY_CALLS = [
    ("session", "create_chat", {"title": "side work"}, ["session/chatAdded"]),
    ("session", "create_session", {"relationship": "independent", "prompt": "hello child", "title": "Child"},
     []),  # the child's actions are on its own channels
    ("artifacts", "add_artifact_or_reference",
     {"items": [{"type": "pullRequest", "label": "Fix login", "isArtifact": True,
                 "link": "https://github.com/acme/app/pull/7"}]}, ["session/metaChanged"]),
    ("comments", "addComment", {"resourceUri": "file:///work/app.py", "text": "Off by one",
                                "range": {"startLineNumber": 3, "startColumn": 1, "endLineNumber": 5, "endColumn": 1}},
     ["annotations/set"]),
    ("wakeups", "schedule_wakeup", {"delaySeconds": 3600, "prompt": "check CI"}, []),
    ("resources", "ahp_resource", {"uri": "SESSION"}, []),
    ("agent_merge", "setAgentMergeEnabled", {"enabled": True, "mergePullRequest": "ifUnchanged"}, []),
]


@pytest.mark.parametrize("family, tool, arguments, published", FAMILY_CALLS,
                         ids=[f"{f}:{t}" for f, t, _, _ in FAMILY_CALLS])
def test_a_tool_call_reduces_to_the_fresh_snapshots(member, session, family, tool, arguments, published):
    chat = default_chat(member, session)
    arguments = {k: session if v == "SESSION" else v for k, v in arguments.items()}
    watch = Watch(member, session, chat, f"{session}/annotations")
    turn = member.start_turn(chat, f"/call {tool} {json.dumps(arguments)}")
    reply = member.reply_to(turn)
    assert not reply.startswith(("Unknown tool", "Invalid input")), reply
    watch.assert_consistent(actions=TURN_WITH_A_CALL + len(published))
    watch.assert_session_list_consistent()


def test_recording_mcp_server_tools_publishes_nothing_and_changes_no_snapshot(member, session):
    """What a client's MCP servers offer is kept for the agent's catalog, not in the session's
    state: nothing is published, and a fresh snapshot is the one held."""
    session_id = uuid.UUID(session.removeprefix("ahp-session:/"))
    watch = Watch(member, session)
    mcp_actions.do_record_client_servers(session_id, "member-client", {"docs": {"url": "https://docs.example/mcp"}})
    mcp_actions.do_record_server_tools(session_id, {"docs": {"tools": [
        {"name": "search", "description": "Search the docs", "inputSchema": {"type": "object"}}]}})
    watch.assert_consistent(actions=0, changes=False)


OPEN_FILE = {"name": "open_file", "description": "Open a file in the editor",
             "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}


# A first turn waiting on a client's tool call: session/titleChanged, session/chatUpdated,
# session/inputNeededSet; chat/turnStarted, chat/toolCallStart, chat/toolCallReady.
OWED_CALL = 6
# Stopping it (chat/truncated, chat/turnCancelled) adds session/inputNeededRemoved,
# session/chatUpdated, chat/toolCallComplete (cancelled) and the action itself.
OWED_CALL_STOPPED = OWED_CALL + 4


def owe_a_client_tool_call(member, session):
    """Announce open_file as this client, then start a turn that calls it: (watch, turn, request)."""
    chat = default_chat(member, session)
    member.dispatch(session, {"type": "session/activeClientSet",
                              "activeClient": {"clientId": "member-client", "tools": [OPEN_FILE]}})
    member.action("session/activeClientSet")
    watch = Watch(member, session, chat)
    turn = member.start_turn(chat, '/call member-client__open_file {"path": "README.md"}')
    return watch, turn, member.action("session/inputNeededSet")["action"]["request"]


def test_an_owed_client_tool_call_reduces_to_the_fresh_session_snapshot(member, session):
    watch, turn, request = owe_a_client_tool_call(member, session)
    watch.assert_consistent(actions=OWED_CALL)


def test_an_owed_client_tool_call_reduces_to_the_fresh_chat_snapshot(member, session):
    watch, turn, request = owe_a_client_tool_call(member, session)
    watch.assert_consistent(actions=3, only=default_chat(member, session))


def test_a_client_tool_call_reduces_to_the_fresh_snapshots_once_complete(member, session):
    watch, turn, request = owe_a_client_tool_call(member, session)
    member.dispatch(default_chat(member, session), {
        "type": "chat/toolCallComplete", "turnId": turn, "toolCallId": request["id"],
        "result": {"success": True, "pastTenseMessage": "Opened the file", "content": [{"type": "text", "text": "opened"}]}})
    member.reply_to(turn)
    # A client's execution never makes the session input-needed, and the turn is over: the session
    # channel is back where it started, so all three agree. The six of an owed call, then
    # session/inputNeededRemoved, session/chatUpdated, chat/toolCallComplete, chat/responsePart and
    # chat/turnComplete.
    watch.assert_consistent(actions=11)
    watch.assert_session_list_consistent()


def ask_a_question(member, session):
    """A waiting comment, then viewUnreviewedComments asks the person first: (watch, chat, turn, request)."""
    chat = default_chat(member, session)
    channel = f"{session}/annotations"
    member.subscribe(channel)
    waiting = {**annotation("c1"), "_meta": {FEEDBACK_KEY: {"kind": "codeReview", "state": "created",
                                                           "sessionResource": session}}}
    member.dispatch(channel, {"type": "annotations/set", "annotation": waiting})
    member.action("annotations/set")
    watch = Watch(member, session, chat, channel)
    turn = member.start_turn(chat, "/call viewUnreviewedComments {}")
    return watch, chat, turn, member.action("session/inputNeededSet")["action"]["request"]


def decline(member, chat, turn, request):
    """Answers the question, so its tool stops waiting (it would outlive the test's server)."""
    member.dispatch(chat, {"type": "chat/toolCallConfirmed", "turnId": turn, "toolCallId": request["id"],
                           "approved": False, "confirmed": "user-action"})
    member.action("chat/turnComplete", turnId=turn)


# An open question: session/titleChanged, session/chatUpdated, session/inputNeededSet;
# chat/turnStarted, chat/toolCallStart, chat/toolCallReady and chat/toolCallReady again, asking.
OPEN_QUESTION = 7


def test_an_open_question_reduces_to_the_fresh_snapshots(member, session):
    watch, chat, turn, request = ask_a_question(member, session)
    watch.assert_consistent(actions=OPEN_QUESTION)
    decline(member, chat, turn, request)


def test_an_open_question_shows_in_fresh_snapshots_as_published(member, session):
    watch, chat, turn, request = ask_a_question(member, session)
    assert request["kind"] == "toolConfirmation"
    watch.assert_consistent(actions=OPEN_QUESTION, but=("status",))
    decline(member, chat, turn, request)


def test_answering_a_tools_question_reduces_to_the_fresh_snapshots(member, session):
    watch, chat, turn, request = ask_a_question(member, session)
    member.dispatch(chat, {"type": "chat/toolCallConfirmed", "turnId": turn, "toolCallId": request["id"],
                           "approved": True, "confirmed": "user-action"})
    member.reply_to(turn)
    # The question's four chat actions, then chat/toolCallConfirmed, chat/toolCallComplete,
    # chat/responsePart, chat/turnComplete; the comment the answer showed is set again, viewed.
    watch.assert_consistent(actions=8, only=chat)
    watch.assert_consistent(actions=1, only=f"{session}/annotations")
    watch.assert_session_list_consistent()



def end_a_turn_in_error(acme, member, session):
    """A turn started and ended in error in process (the echo agent never fails): (watch, chat)."""
    chat_uri = default_chat(member, session)
    chat = Chat.objects.get(id=chat_uri.removeprefix("ahp-chat:/"))
    watch = Watch(member, session, chat_uri)
    turn = session_actions.do_start_turn(acme.principal("member"), chat, uuid.uuid4(), "hello")
    session_actions.do_end_turn(turn.id, error="the agent fell over")
    member.action("chat/error")
    return watch, chat_uri


def test_a_turn_ending_in_error_leaves_the_chat_in_error_everywhere(acme, member, session):
    watch, chat = end_a_turn_in_error(acme, member, session)
    reduced_chat = reduce(chat, watch.before[chat][0], logged_between(chat, watch.before[chat][1], 10**9))
    reduced_session = reduce(session, watch.before[session][0], logged_between(session, watch.before[session][1], 10**9))
    fresh_chat, fresh_session = member.subscribe(chat), member.subscribe(session)
    assert reduced_chat["status"] == fresh_chat["status"] == 2
    assert reduced_session["chats"] == fresh_session["chats"]
    assert fresh_session["chats"][0]["status"] == 2


def test_a_turn_ending_in_error_reduces_to_the_fresh_snapshots(acme, member, session):
    watch, chat = end_a_turn_in_error(acme, member, session)
    # session/titleChanged, session/chatUpdated (title, then status); chat/turnStarted, chat/error
    watch.assert_consistent(actions=5)


def test_a_failed_turns_error_reduces_to_the_fresh_chat_snapshot(acme, member, session):
    watch, chat = end_a_turn_in_error(acme, member, session)
    watch.assert_consistent(actions=2, only=chat)
    assert member.subscribe(chat)["turns"][-1]["error"] == {"errorType": "agentError", "message": "the agent fell over"}


# Pending messages and stopping a turn, on a chat whose turn waits on a client's call. ----------

def pending(kind, message_id, text):
    return {"type": "chat/pendingMessageSet", "kind": kind, "id": message_id,
            "message": {"text": text, "origin": {"kind": "user"}}}


QUEUED_A, QUEUED_B, STEERING = (str(uuid.UUID(int=n)) for n in (0xA, 0xB, 0x5))
# Stopping the waiting turn ends its call and the turn (session/inputNeededRemoved,
# chat/toolCallComplete, the action itself); then the steering message and the two queued ones are
# each a turn (chat/pendingMessageRemoved, chat/turnStarted, chat/responsePart, chat/turnComplete),
# the chat's status on the session changing (session/chatUpdated) at the stop and at each turn's
# start and end.
STOPPED_AND_DRAINED = 3 + 3 * 4 + 1 + 3 * 2
# (the action, how many actions it logs)
PENDING_ACTIONS = [
    (pending("queued", QUEUED_A, "first, edited"), 1),
    (pending("steering", STEERING, "steer instead"), 1),
    ({"type": "chat/pendingMessageRemoved", "kind": "queued", "id": QUEUED_A}, 1),
    ({"type": "chat/queuedMessagesReordered", "order": [QUEUED_B, QUEUED_A]}, 1),
    ({"type": "chat/turnCancelled", "turnId": "TURN"}, STOPPED_AND_DRAINED),
    ({"type": "chat/truncated"}, STOPPED_AND_DRAINED),
]


@pytest.mark.parametrize("action, actions", PENDING_ACTIONS, ids=lambda a: f"{a['type']}:{a.get('kind', '')}"
                         if isinstance(a, dict) else str(a))
def test_a_pending_message_or_cancel_action_reduces_to_the_fresh_snapshots(member, session, action, actions):
    chat = default_chat(member, session)
    member.subscribe(chat)
    _, turn, _ = owe_a_client_tool_call(member, session)
    for queued, text in ((QUEUED_A, "first"), (QUEUED_B, "second"), (STEERING, "steer")):
        member.dispatch(chat, pending("steering" if queued == STEERING else "queued", queued, text))
        member.action("chat/pendingMessageSet", id=queued)
    watch = Watch(member, session, chat)
    member.dispatch(chat, {k: turn if v == "TURN" else v for k, v in action.items()})
    member.action(action["type"])
    if action["type"] in ("chat/turnCancelled", "chat/truncated"):  # the steering message is taken next
        for message_id in (STEERING, QUEUED_A, QUEUED_B):
            taken = member.action("chat/turnStarted", queuedMessageId=message_id)["action"]["turnId"]
            member.action("chat/turnComplete", turnId=taken)
    watch.assert_consistent(actions=actions)
    watch.assert_session_list_consistent()


# A terminal: what a client types, the shell's output, a resize, a claim, the end. ---------------

TERMINAL_ACTIONS = [
    ("typed", {"type": "terminal/input", "data": "echo hi-$((40+2))\n"}, "terminal/data"),
    ("resized", {"type": "terminal/resized", "cols": 90, "rows": 20}, None),
    ("claimed", {"type": "terminal/claimed", "claim": {"kind": "session", "session": "SESSION"}}, None),
    ("renamed", {"type": "terminal/titleChanged", "title": "logs"}, None),
    ("cleared", {"type": "terminal/cleared"}, None),
    ("exited", {"type": "terminal/input", "data": "exit 5\n"}, "terminal/exited"),
]
# What each logs besides the shell's output: the action itself, and the end when the shell exits.
TERMINAL_LOGGED = {"exited": 2}


@pytest.mark.e2e
@pytest.mark.parametrize("name, action, answer", TERMINAL_ACTIONS, ids=[t[0] for t in TERMINAL_ACTIONS])
def test_a_terminal_action_reduces_to_the_fresh_snapshot(member, workspace, name, action, answer):
    folder = workspace / "term"
    folder.mkdir()
    session = member.create_session(workingDirectories=[folder.as_uri()])
    terminal = f"ahp-terminal:/{uuid.uuid4()}"
    member.call("createTerminal", {"channel": terminal, "session": session})
    if not member.subscribe(terminal)["content"]:  # the shell's prompt: in the snapshot, or still to come
        member.action("terminal/data", timeout=60)
    watch = Watch(member, terminal)
    if name == "claimed":
        action = {**action, "claim": {"kind": "session", "session": session}}
    member.dispatch(terminal, action)
    member.action(action["type"])
    if answer:
        member.action(answer)
        time.sleep(0.3)  # the rest of the shell's output
    watch.assert_consistent(actions=TERMINAL_LOGGED.get(name, 1), uncounted=("terminal/data",))


def root_frames(client, after):
    """The root channel's action envelopes this socket heard numbered after `after`, as sent to it."""
    return [f["params"] for f in client.notifications
            if f.get("method") == "action" and f["params"]["channel"] == ROOT and f["params"]["serverSeq"] > after]


@pytest.mark.e2e
def test_a_terminals_life_reduces_to_the_fresh_root_snapshot(member, workspace):
    """Created, renamed, cleared, exited, disposed: the root's `terminals` kept by
    root/terminalsChanged, both as logged and as this subscriber heard it."""
    folder = workspace / "term"
    folder.mkdir()
    session = member.create_session(workingDirectories=[folder.as_uri()])
    watch = Watch(member, ROOT)
    root, from_seq = watch.before[ROOT]
    terminal = f"ahp-terminal:/{uuid.uuid4()}"
    member.call("createTerminal", {"channel": terminal, "session": session, "name": "build"})
    member.subscribe(terminal)
    # (the action, what it is heard as, how many root/terminalsChanged were logged since the watch began)
    steps = [({"type": "terminal/titleChanged", "title": "logs"}, "terminal/titleChanged", 2),
             ({"type": "terminal/cleared"}, "terminal/cleared", 2),
             ({"type": "terminal/input", "data": "exit 5\n"}, "terminal/exited", 3)]
    lists = [member.action("root/terminalsChanged")["action"]["terminals"]]
    for action, heard, logged in steps:
        member.dispatch(terminal, action)
        member.action(heard)
        if heard != "terminal/cleared":  # the kept output is not in the root's list
            lists.append(member.action("root/terminalsChanged")["action"]["terminals"])
        watch.assert_consistent(actions=logged)
    mine = {"kind": "client", "clientId": "member-client"}
    assert lists == [[{"resource": terminal, "title": "build", "claim": mine}],
                     [{"resource": terminal, "title": "logs", "claim": mine}],
                     [{"resource": terminal, "title": "logs", "claim": mine, "exitCode": 5}]]
    assert member.call("disposeTerminal", {"channel": terminal}) is None
    member.action("root/terminalsChanged", terminals=[])
    watch.assert_consistent(actions=4, changes=False)  # the root lists no terminal again, as before
    heard = root
    for envelope in sorted(root_frames(member, from_seq), key=lambda e: e["serverSeq"]):
        heard = reduce_root(heard, envelope["action"])
    assert heard == snapshot(member, ROOT)[0] and heard["terminals"] == []


def test_a_moved_chat_reduces_to_the_fresh_session_list_and_routes(member):
    source, target = member.create_session(), member.create_session()
    chat = f"ahp-chat:/{uuid.uuid4()}"
    member.call("createChat", {"channel": source, "chat": chat})
    member.subscribe(chat)
    watch = Watch(member, source, target)
    routes = chat_routes(watch.sessions.values())
    assert routes[chat] == source
    result = member.call("moveChat", {"channel": chat, "destination": {"kind": "chat", "chat": default_chat(member,
                                      target)}, "requestId": str(uuid.uuid4())})
    moved = member.notification("chat/moved")
    assert moved == {"channel": chat, **result}
    for _ in range(2):  # the duplicate of a notification is idempotent
        routes = reduce_chat_moved(routes, moved)
    member.action("session/chatAdded")
    watch.assert_consistent(actions=2)  # session/chatRemoved on the source, session/chatAdded on the target
    watch.assert_session_list_consistent()
    assert routes == chat_routes(watch.session_list().values()) and routes[chat] == target
