"""A client's copy of the host's state: the protocol's reducer rules (agent-host-protocol
`types/channels-*/reducer.ts`) applied to published action envelopes, so a test can hold the
host to "snapshot + actions == a fresh snapshot".

Where the protocol's reducer stamps a field from the client's own clock (a chat's `modifiedAt`
when a turn starts or ends), the reduced copy holds ANY_TIME: the host's value is its own."""
import copy

IS_READ, IS_ARCHIVED = 32, 64
ACTIVITY_MASK = (1 << 5) - 1
IDLE, ERROR, IN_PROGRESS, INPUT_NEEDED = 1, 2, 8, 24


class AnyTime(str):
    def __eq__(self, other):
        return isinstance(other, str)

    def __hash__(self):
        return 0


ANY_TIME = AnyTime("any time")


def with_flag(status, flag, on):
    return status | flag if on else status & ~flag


def awaits_user(request):
    """A client's tool execution is work handed to a client, not a question to the person, so it
    leaves the session in progress (the protocol's `awaitsUser`)."""
    return request["kind"] != "toolClientExecution"


def with_input_needed(status, input_needed):
    """An entry awaiting the person makes the activity input-needed; once none does, it falls back
    to in-progress."""
    if any(awaits_user(r) for r in input_needed):
        return status & ~ACTIVITY_MASK | INPUT_NEEDED
    return status & ~(INPUT_NEEDED & ~IN_PROGRESS)


def upsert(items, key, value, item):
    rest = [i for i in items if i[key] != value]
    return [*rest, item] if len(rest) == len(items) else [item if i[key] == value else i for i in items]


def add_working_directory(state, action):
    if action["directory"] not in state["workingDirectories"]:
        state["workingDirectories"] = [*state["workingDirectories"], action["directory"]]


def set_config_values(state, action):
    values = action["config"] if action.get("replace") else {**state["config"]["values"], **action["config"]}
    state["config"] = {**state["config"], "values": values}


def set_input_needed(state, entries):
    state["inputNeeded"] = entries
    state["status"] = with_input_needed(state["status"], entries)


# Each session action's rule, applied to a copy of the state.
SESSION_RULES = {
    "session/ready": lambda s, a: s.update(lifecycle="ready"),
    "session/titleChanged": lambda s, a: s.update(title=a["title"]),
    "session/isReadChanged": lambda s, a: s.update(status=with_flag(s["status"], IS_READ, a["isRead"])),
    "session/isArchivedChanged": lambda s, a: s.update(status=with_flag(s["status"], IS_ARCHIVED, a["isArchived"])),
    "session/serverToolsChanged": lambda s, a: s.update(serverTools=a["tools"]),
    "session/metaChanged": lambda s, a: s.update(_meta=a["_meta"]),
    "session/activeClientSet": lambda s, a: s.update(activeClients=upsert(
        s["activeClients"], "clientId", a["activeClient"]["clientId"], a["activeClient"])),
    "session/activeClientRemoved": lambda s, a: s.update(
        activeClients=[c for c in s["activeClients"] if c["clientId"] != a["clientId"]]),
    "session/chatAdded": lambda s, a: s.update(chats=[*s["chats"], a["summary"]]),
    "session/chatRemoved": lambda s, a: s.update(chats=[c for c in s["chats"] if c["resource"] != a["chat"]]),
    "session/chatUpdated": lambda s, a: s.update(
        chats=[{**c, **a["changes"]} if c["resource"] == a["chat"] else c for c in s["chats"]]),
    "session/inputNeededSet": lambda s, a: set_input_needed(
        s, upsert(s["inputNeeded"], "id", a["request"]["id"], a["request"])),
    "session/inputNeededRemoved": lambda s, a: set_input_needed(
        s, [r for r in s["inputNeeded"] if r["id"] != a["id"]]),
    "session/configChanged": set_config_values,
    "session/defaultChatChanged": lambda s, a: s.update(defaultChat=a.get("defaultChat")),  # absent clears the hint
    "session/workingDirectorySet": add_working_directory,
    "session/workingDirectoryRemoved": lambda s, a: s.update(
        workingDirectories=[d for d in s["workingDirectories"] if d != a["directory"]]),
}


def reduce_session(state, action):
    return applied(SESSION_RULES, "session", state, action)


def applied(rules, reducer, state, action):
    """A copy of `state` with `action`'s rule applied to it."""
    state, kind = copy.deepcopy(state), action["type"]
    if kind not in rules:
        raise AssertionError(f"the {reducer} reducer does not know {kind}")
    rules[kind](state, action)
    return state


def chat_activity(state, terminal=None):
    activity = terminal or (IN_PROGRESS if state.get("activeTurn") else IDLE)
    return state["status"] & ~ACTIVITY_MASK | activity


def end_turn(state, action, turn_state, terminal=None, error=None):
    active = state.get("activeTurn")
    if not active or active["id"] != action["turnId"]:
        return state
    turn = {**state.pop("activeTurn"), "state": turn_state, "duration": max(0, action["duration"])}
    if error is not None:
        turn["error"] = error
    state["turns"] = [*state["turns"], turn]
    state["modifiedAt"] = ANY_TIME
    state["status"] = chat_activity(state, terminal)
    return state


def call_base(tc):
    """What a tool call keeps across a transition (the reducer rebuilds the rest)."""
    keep = ("toolCallId", "toolName", "displayName", "contributor", "_meta", "invocationMessage", "toolInput")
    return {k: tc[k] for k in keep if k in tc}


def update_call(state, action, change):
    active = state.get("activeTurn")
    if active and active["id"] == action["turnId"]:
        for part in active["responseParts"]:
            if part.get("kind") == "toolCall" and part["toolCall"]["toolCallId"] == action["toolCallId"]:
                part["toolCall"] = change(part["toolCall"])
    return state


def drop_steering(state, message_id):
    if (state.get("steeringMessage") or {}).get("id") == message_id:
        del state["steeringMessage"]


def drop_queued(state, message_id):
    rest = [m for m in state.get("queuedMessages", []) if m["id"] != message_id]
    state.pop("queuedMessages", None)
    if rest:
        state["queuedMessages"] = rest


def turn_started(state, action):
    state["activeTurn"] = {"id": action["turnId"], "startedAt": action["startedAt"], "message": action["message"],
                           "responseParts": []}
    state["status"] = with_flag(chat_activity(state), IS_READ, False)
    state["modifiedAt"] = ANY_TIME
    queued = action.get("queuedMessageId")
    if queued:
        drop_steering(state, queued)
        drop_queued(state, queued)


def add_response_part(state, action, part):
    if (state.get("activeTurn") or {}).get("id") == action["turnId"]:
        state["activeTurn"]["responseParts"].append(part)


def tool_call_started(state, action):
    call = {k: action[k] for k in ("toolCallId", "toolName", "displayName", "contributor", "_meta") if k in action}
    add_response_part(state, action, {"kind": "toolCall", "toolCall": {**call, "status": "streaming"}})


def tool_call_ready(state, action):
    fields = {k: v for k, v in action.items() if k not in ("type", "turnId")}
    status = "running" if action.get("confirmed") else "pending-confirmation"
    # As the protocol's reducer: the state is rebuilt, so a running call asked again drops `confirmed`.
    update_call(state, action, lambda tc: {**call_base(tc), **fields, "status": status})


def tool_call_confirmed(state, action):
    status = "running" if action["approved"] else "cancelled"
    fields = {k: action[k] for k in ("confirmed", "reason") if k in action}
    update_call(state, action, lambda tc: {**call_base(tc), **fields, "status": status} if tc[
        "status"] == "pending-confirmation" else tc)


def tool_call_completed(state, action):
    def complete(tc):
        if tc["status"] not in ("running", "pending-confirmation"):
            return tc
        confirmed = tc.get("confirmed") if tc["status"] == "running" else "not-needed"
        return {**call_base(tc), "confirmed": confirmed, **action["result"], "status": "completed"}
    update_call(state, action, complete)


def pending_message_set(state, action):
    entry = {"id": action["id"], "message": action["message"]}
    if action["kind"] == "steering":
        state["steeringMessage"] = entry
    else:
        state["queuedMessages"] = upsert(state.get("queuedMessages", []), "id", action["id"], entry)


def pending_message_removed(state, action):
    if action["kind"] == "steering":
        drop_steering(state, action["id"])
    else:
        drop_queued(state, action["id"])


def truncated(state, action):
    keep = next((i + 1 for i, t in enumerate(state["turns"]) if t["id"] == action.get("turnId")), 0)
    state["turns"] = state["turns"][:keep]
    state.pop("activeTurn", None)
    state["status"] = chat_activity(state, ERROR if state["turns"] and state["turns"][-1]["state"] == "error" else None)
    state["modifiedAt"] = ANY_TIME


def queued_messages_reordered(state, action):
    queued = {m["id"]: m for m in state.get("queuedMessages", [])}
    wanted = [i for i in dict.fromkeys(action["order"]) if i in queued]
    if queued:
        state["queuedMessages"] = [queued[i] for i in wanted + [i for i in queued if i not in wanted]]


# Each chat action's rule, applied to a copy of the state.
CHAT_RULES = {
    "chat/turnStarted": turn_started,
    "chat/responsePart": lambda s, a: add_response_part(s, a, a["part"]),
    "chat/turnComplete": lambda s, a: end_turn(s, a, "complete"),
    "chat/turnCancelled": lambda s, a: end_turn(s, a, "cancelled"),
    "chat/error": lambda s, a: end_turn(s, a, "error", ERROR, a.get("error")),
    "chat/toolCallStart": tool_call_started,
    "chat/toolCallReady": tool_call_ready,
    "chat/toolCallConfirmed": tool_call_confirmed,
    "chat/toolCallComplete": tool_call_completed,
    "chat/pendingMessageSet": pending_message_set,
    "chat/pendingMessageRemoved": pending_message_removed,
    "chat/truncated": truncated,
    "chat/queuedMessagesReordered": queued_messages_reordered,
}


def reduce_chat(state, action):
    return applied(CHAT_RULES, "chat", state, action)


def root_config_changed(state, action):
    if "config" in state:  # as the protocol's reducer: a root state without config stays without
        set_config_values(state, action)


ROOT_RULES = {
    "root/configChanged": root_config_changed,
    "root/terminalsChanged": lambda s, a: s.update(terminals=a["terminals"]),  # the whole list, replaced
    "root/agentsChanged": lambda s, a: s.update(agents=a["agents"]),
}


def reduce_root(state, action):
    return applied(ROOT_RULES, "root", state, action)


SESSION_CHAT_SUMMARY_KEYS = {"resource", "title", "origin", "status"}
IDENTITY_KEYS = ("resource", "provider", "createdAt")


def check_catalogue(summary):
    """A summary's `chats` (SessionChatSummary[]) and `defaultChat`, as the 1.1 types shape them:
    each chat exactly its four fields, the default chat one of them."""
    if "chats" in summary:
        assert all(set(c) == SESSION_CHAT_SUMMARY_KEYS for c in summary["chats"]), summary["chats"]
        assert len({c["resource"] for c in summary["chats"]}) == len(summary["chats"]), summary["chats"]
    if summary.get("defaultChat") is not None and "chats" in summary:
        assert summary["defaultChat"] in {c["resource"] for c in summary["chats"]}, summary


def reduce_session_list(sessions, method, params):
    """The root channel's session list (listSessions' items) under root/session* notifications.
    root/sessionSummaryChanged's `changes` is a Partial<SessionSummary>: each field present
    replaces the cached one whole (so `chats` replaces the whole catalogue and `defaultChat` the
    hint), identity fields are ignored, an unknown session is ignored."""
    if method == "root/sessionAdded":
        check_catalogue(params["summary"])
        return [params["summary"], *sessions]
    if method == "root/sessionRemoved":
        return [s for s in sessions if s["resource"] != params["session"]]
    if method == "root/sessionSummaryChanged":
        changes = {k: v for k, v in params["changes"].items() if k not in IDENTITY_KEYS}
        check_catalogue(changes)
        reduced = []
        for s in sessions:
            if s["resource"] == params["session"]:
                s = {**s, **changes}
                if "chats" in changes:
                    s["chats"] = [dict(c) for c in changes["chats"]]
                check_catalogue(s)
            reduced.append(s)
        return reduced
    raise AssertionError(f"the session list does not know {method}")


def reduce_chat_moved(sessions, params):
    """chat/moved (a notification on each moved chat's old channel, not logged nor replayed): a
    client applies the whole `movedChats` mapping to its routing (which session owns which chat)
    and reconciles from the catalogues, which root/sessionSummaryChanged brings here. `sessions`
    maps a chat URI to its session's URI; the mapping moves every listed chat to `session`.
    Duplicate notifications of one move are idempotent."""
    assert params["channel"] in {m["previousChat"] for m in params["movedChats"]}, params
    assert any(m["previousChat"] == params["previousChat"] and m["chat"] == params["chat"]
               for m in params["movedChats"]), params
    routes = dict(sessions)
    for moved in params["movedChats"]:
        routes.pop(moved["previousChat"], None)
        routes[moved["chat"]] = params["session"]
    return routes


def chat_routes(sessions):
    """chat URI -> session URI, read off a session list's catalogues (reduce_chat_moved's input)."""
    return {c["resource"]: s["resource"] for s in sessions for c in s.get("chats", [])}


def reduce_annotations(state, action):
    state, kind = copy.deepcopy(state), action["type"]
    rows = state["annotations"]
    if kind == "annotations/set":
        rows = upsert(rows, "id", action["annotation"]["id"], action["annotation"])
    elif kind == "annotations/removed":
        rows = [a for a in rows if a["id"] != action["annotationId"]]
    elif kind == "annotations/updated":
        changes = {k: action[k] for k in ("resolved", "range", "turnId", "resource") if k in action}
        rows = [{**a, **changes} if a["id"] == action["annotationId"] else a for a in rows]
    elif kind == "annotations/entrySet":
        rows = [{**a, "entries": upsert(a["entries"], "id", action["entry"]["id"], action["entry"])}
                if a["id"] == action["annotationId"] else a for a in rows]
    elif kind == "annotations/entryRemoved":
        rows = [{**a, "entries": [e for e in a["entries"] if e["id"] != action["entryId"]]}
                if a["id"] == action["annotationId"] else a for a in rows]
    else:
        raise AssertionError(f"the annotations reducer does not know {kind}")
    return {**state, "annotations": rows}


def reduce_terminal(state, action):
    state, kind = copy.deepcopy(state), action["type"]
    if kind == "terminal/data":
        parts = state["content"]
        if parts and parts[-1]["type"] == "unclassified":
            parts[-1] = {**parts[-1], "value": parts[-1]["value"] + action["data"]}
        else:
            state["content"] = [*parts, {"type": "unclassified", "value": action["data"]}]
    elif kind == "terminal/input":
        pass  # what was typed; the shell's answer comes as terminal/data
    elif kind == "terminal/resized":
        state.update(cols=action["cols"], rows=action["rows"])
    elif kind == "terminal/claimed":
        state["claim"] = action["claim"]
    elif kind == "terminal/exited":
        state["exitCode"] = action["exitCode"]
    elif kind == "terminal/titleChanged":
        state["title"] = action["title"]
    elif kind == "terminal/cwdChanged":
        state["cwd"] = action["cwd"]
    elif kind == "terminal/cleared":
        state["content"] = []
    else:
        raise AssertionError(f"the terminal reducer does not know {kind}")
    return state


REDUCERS = {"ahp-session": reduce_session, "ahp-chat": reduce_chat, "ahp-root": reduce_root,
            "ahp-annotations": reduce_annotations, "ahp-terminal": reduce_terminal}


def reduce(channel, state, envelopes):
    """`state` of `channel` with the envelopes published on it applied in serverSeq order."""
    reducer = REDUCERS["ahp-annotations" if channel.endswith("/annotations") else channel.split(":")[0]]
    for envelope in sorted(envelopes, key=lambda e: e["serverSeq"]):
        if envelope["channel"] == channel and "rejectionReason" not in envelope:
            state = reducer(state, envelope["action"])
    return state
