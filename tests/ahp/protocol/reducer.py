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


def reduce_session(state, action):
    state, kind = copy.deepcopy(state), action["type"]
    if kind == "session/ready":
        state["lifecycle"] = "ready"
    elif kind == "session/titleChanged":
        state["title"] = action["title"]
    elif kind == "session/isReadChanged":
        state["status"] = with_flag(state["status"], IS_READ, action["isRead"])
    elif kind == "session/isArchivedChanged":
        state["status"] = with_flag(state["status"], IS_ARCHIVED, action["isArchived"])
    elif kind == "session/serverToolsChanged":
        state["serverTools"] = action["tools"]
    elif kind == "session/metaChanged":
        state["_meta"] = action["_meta"]
    elif kind == "session/activeClientSet":
        client = action["activeClient"]
        state["activeClients"] = upsert(state["activeClients"], "clientId", client["clientId"], client)
    elif kind == "session/activeClientRemoved":
        state["activeClients"] = [c for c in state["activeClients"] if c["clientId"] != action["clientId"]]
    elif kind == "session/chatAdded":
        state["chats"] = [*state["chats"], action["summary"]]
    elif kind == "session/chatRemoved":
        state["chats"] = [c for c in state["chats"] if c["resource"] != action["chat"]]
    elif kind == "session/chatUpdated":
        state["chats"] = [{**c, **action["changes"]} if c["resource"] == action["chat"] else c for c in state["chats"]]
    elif kind == "session/inputNeededSet":
        state["inputNeeded"] = upsert(state["inputNeeded"], "id", action["request"]["id"], action["request"])
        state["status"] = with_input_needed(state["status"], state["inputNeeded"])
    elif kind == "session/inputNeededRemoved":
        state["inputNeeded"] = [r for r in state["inputNeeded"] if r["id"] != action["id"]]
        state["status"] = with_input_needed(state["status"], state["inputNeeded"])
    elif kind == "session/configChanged":
        values = action["config"] if action.get("replace") else {**state["config"]["values"], **action["config"]}
        state["config"] = {**state["config"], "values": values}
    elif kind == "session/defaultChatChanged":
        state["defaultChat"] = action.get("defaultChat")  # absent clears the hint
    elif kind == "session/workingDirectorySet":
        if action["directory"] not in state["workingDirectories"]:
            state["workingDirectories"] = [*state["workingDirectories"], action["directory"]]
    elif kind == "session/workingDirectoryRemoved":
        state["workingDirectories"] = [d for d in state["workingDirectories"] if d != action["directory"]]
    else:
        raise AssertionError(f"the session reducer does not know {kind}")
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


def reduce_chat(state, action):
    state, kind = copy.deepcopy(state), action["type"]
    if kind == "chat/turnStarted":
        state["activeTurn"] = {"id": action["turnId"], "startedAt": action["startedAt"], "message": action["message"],
                               "responseParts": []}
        state["status"] = with_flag(chat_activity(state), IS_READ, False)
        state["modifiedAt"] = ANY_TIME
        queued = action.get("queuedMessageId")
        if queued:
            if (state.get("steeringMessage") or {}).get("id") == queued:
                del state["steeringMessage"]
            rest = [m for m in state.get("queuedMessages", []) if m["id"] != queued]
            state.pop("queuedMessages", None)
            if rest:
                state["queuedMessages"] = rest
    elif kind == "chat/responsePart":
        if (state.get("activeTurn") or {}).get("id") == action["turnId"]:
            state["activeTurn"]["responseParts"].append(action["part"])
    elif kind == "chat/turnComplete":
        state = end_turn(state, action, "complete")
    elif kind == "chat/turnCancelled":
        state = end_turn(state, action, "cancelled")
    elif kind == "chat/error":
        state = end_turn(state, action, "error", ERROR, action.get("error"))
    elif kind == "chat/toolCallStart":
        if (state.get("activeTurn") or {}).get("id") == action["turnId"]:
            call = {k: action[k] for k in ("toolCallId", "toolName", "displayName", "contributor", "_meta") if k in action}
            state["activeTurn"]["responseParts"].append({"kind": "toolCall", "toolCall": {**call, "status": "streaming"}})
    elif kind == "chat/toolCallReady":
        fields = {k: v for k, v in action.items() if k not in ("type", "turnId")}
        status = "running" if action.get("confirmed") else "pending-confirmation"
        # As the protocol's reducer: the state is rebuilt, so a running call asked again drops `confirmed`.
        state = update_call(state, action, lambda tc: {**call_base(tc), **fields, "status": status})
    elif kind == "chat/toolCallConfirmed":
        status = "running" if action["approved"] else "cancelled"
        fields = {k: action[k] for k in ("confirmed", "reason") if k in action}
        state = update_call(state, action, lambda tc: {**call_base(tc), **fields, "status": status} if tc[
            "status"] == "pending-confirmation" else tc)
    elif kind == "chat/toolCallComplete":
        def complete(tc):
            if tc["status"] not in ("running", "pending-confirmation"):
                return tc
            confirmed = tc.get("confirmed") if tc["status"] == "running" else "not-needed"
            return {**call_base(tc), "confirmed": confirmed, **action["result"], "status": "completed"}
        state = update_call(state, action, complete)
    elif kind == "chat/pendingMessageSet":
        entry = {"id": action["id"], "message": action["message"]}
        if action["kind"] == "steering":
            state["steeringMessage"] = entry
        else:
            state["queuedMessages"] = upsert(state.get("queuedMessages", []), "id", action["id"], entry)
    elif kind == "chat/pendingMessageRemoved":
        if action["kind"] == "steering":
            if (state.get("steeringMessage") or {}).get("id") == action["id"]:
                del state["steeringMessage"]
        else:
            rest = [m for m in state.get("queuedMessages", []) if m["id"] != action["id"]]
            state.pop("queuedMessages", None)
            if rest:
                state["queuedMessages"] = rest
    elif kind == "chat/truncated":
        keep = next((i + 1 for i, t in enumerate(state["turns"]) if t["id"] == action.get("turnId")), 0)
        state["turns"] = state["turns"][:keep]
        state.pop("activeTurn", None)
        state["status"] = chat_activity(state, ERROR if state["turns"] and state["turns"][-1]["state"] == "error" else None)
        state["modifiedAt"] = ANY_TIME
    elif kind == "chat/queuedMessagesReordered":
        queued = {m["id"]: m for m in state.get("queuedMessages", [])}
        wanted = [i for i in dict.fromkeys(action["order"]) if i in queued]
        if queued:
            state["queuedMessages"] = [queued[i] for i in wanted + [i for i in queued if i not in wanted]]
    else:
        raise AssertionError(f"the chat reducer does not know {kind}")
    return state


def reduce_root(state, action):
    state, kind = copy.deepcopy(state), action["type"]
    if kind == "root/configChanged":
        if "config" in state:  # as the protocol's reducer: a root state without config stays without
            values = action["config"] if action.get("replace") else {**state["config"]["values"], **action["config"]}
            state["config"] = {**state["config"], "values": values}
    elif kind == "root/terminalsChanged":
        state["terminals"] = action["terminals"]  # the whole list, replaced
    elif kind == "root/agentsChanged":
        state["agents"] = action["agents"]
    else:
        raise AssertionError(f"the root reducer does not know {kind}")
    return state


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
