"""The fourteen session tools (group "session"): names and input schemas follow the reference
host's (VS Code's agent host session server tools), so a skill written against it works here;
`agent`, `config`, `list_agents`, `list_models`, `archive_chat` and `move_session` are this
host's own."""
from ...catalog.registry import Tool
from . import context, listing, orchestration, workspace

SESSION_REF = "a session URI from `list_sessions` or an `agent-host-session://` link"
STATUS_FILTER = {"type": "array", "items": {"type": "string", "enum": list(listing.STATUS_WORDS)},
                 "description": "Only sessions whose status is one of these; `archived` implies includeArchived."}

LIST_SESSIONS_SCHEMA = {"type": "object", "properties": {
    "session": {"type": "string", "description": f"Return only this session ({SESSION_REF}), ignoring the filters."},
    "status": STATUS_FILTER,
    "workspace": {"type": "string", "description": "Only sessions working in this folder path or URI."},
    "unread": {"type": "boolean", "description": "Only sessions with updates the user has not seen."},
    "includeArchived": {"type": "boolean", "description": "Also return archived sessions (default false)."},
    "createdAfter": {"type": "string", "description": "Only sessions created at or after this ISO-8601 time."},
    "createdBefore": {"type": "string", "description": "Only sessions created at or before this ISO-8601 time."},
}}
CREATE_SESSION_SCHEMA = {"type": "object", "properties": {
    "relationship": {"type": "string", "enum": ["currentSession", "independent"],
                     "default": "currentSession",
                     "description": "`currentSession` (the default): a new chat in this session; `independent`: a "
                                    "session of its own (the default when no session calls)."},
    "prompt": {"type": "string", "description": "Initial prompt to send to the new chat or session."},
    "workspace": {"type": "string", "description": "Absolute folder path or URI the new session works in."},
    "worktree": {"type": "boolean", "description": "Work in an isolated Git worktree of `workspace`."},
    "title": {"type": "string", "maxLength": 200, "description": "Short title for the new chat or session."},
    "model": {"type": "string", "description": "Model id or name; defaults to the current chat's."},
    "agent": {"type": "string", "description": "The agent (provider id) to start; see list_agents."},
    "config": {"type": "object", "description": "Settings for the agent, checked against its schema."},
}, "required": ["prompt", "title"]}
RENAME_CHAT_SCHEMA = {"type": "object", "properties": {
    "session": {"type": "string", "description": f"Optional owning session: {SESSION_REF}."},
    "chat": {"type": "string", "description": "The chat to rename (a chat link); omit to rename this chat."},
    "title": {"type": "string", "maxLength": 200, "description": "Short, descriptive chat title, ideally 1-4 words."},
    "automatic": {"type": "boolean", "description": "True only when answering the host's automatic title reminder."},
}, "required": ["title"]}
SEND_MESSAGE_SCHEMA = {"type": "object", "properties": {
    "session": {"type": "string", "description": f"The session or chat to message: {SESSION_REF}; "
                                                 "a link carrying a chat id targets that chat."},
    "message": {"type": "string", "description": "The message to send."},
}, "required": ["session", "message"]}
GET_SESSION_CONTEXT_SCHEMA = {"type": "object", "properties": {
    "session": {"type": "string", "description": f"The session or chat to read: {SESSION_REF}."},
    "detail": {"type": "string", "enum": ["summary", "digest", "full"],
               "description": "`summary` (default), `digest` (whole replies, tool calls) or `full` (tool inputs)."},
    "transcriptLimit": {"type": "number", "description": "Most-recent turns to include; default 10, at most 50."},
    "responseTurnId": {"type": "string", "description": "Read this turn's whole reply, a page at a time."},
    "responseOffset": {"type": "integer", "minimum": 0, "description": "Where the page of the reply starts."},
}, "required": ["session"]}
DELETE_SESSION_SCHEMA = {"type": "object", "properties": {
    "session": {"type": "string", "description": f"The session to delete: {SESSION_REF}."},
}, "required": ["session"]}
SET_WORKSPACE_SCHEMA = {"type": "object", "properties": {
    "workspaceFolder": {"type": "string", "description": "Absolute local folder path or file URI to work in."},
    "isolation": {"type": "boolean", "description": "Work in a new Git worktree of the folder instead."},
}, "required": ["workspaceFolder", "isolation"]}
CREATE_CHAT_SCHEMA = {"type": "object", "properties": {
    "session": {"type": "string", "description": f"The session to add the chat to ({SESSION_REF}); "
                                                 "omit for this session."},
    "title": {"type": "string", "maxLength": 200, "description": "Short title for the chat."},
    "prompt": {"type": "string", "description": "Initial prompt to start the chat with."},
    "agent": {"type": "string", "description": "Run the chat on this agent instead of the session's."},
}, "required": ["title"]}
ARCHIVE_CHAT_SCHEMA = {"type": "object", "properties": {
    "chat": {"type": "string", "description": "A chat link: a nested chat is archived alone, a main chat "
                                              "archives its whole session."},
    "session": {"type": "string", "description": f"Archive this whole session ({SESSION_REF})."},
}}
MOVE_SESSION_SCHEMA = {"type": "object", "properties": {
    "session": {"type": "string", "description": f"The session to move ({SESSION_REF})."},
    "relationship": {"type": "string", "enum": ["currentSession", "independent"],
                     "description": "`currentSession`: nest it into this session; `independent`: make it a "
                                    "session of its own. Omit to nest it `into` another session or reorder it."},
    "into": {"type": "string", "description": "Nest it into this session."},
    "after": {"type": "string", "description": "Place it right after this nested session."},
}, "required": ["session"]}
LIST_MODELS_SCHEMA = {"type": "object", "properties": {
    "agent": {"type": "string", "description": "Only this agent's models (provider id)."}}}


def create_session_wording(session):
    """`agent` is an enum of the agents the host can start, each named in its description."""
    agents = listing.startable_agents()
    schema = {**CREATE_SESSION_SCHEMA, "properties": {**CREATE_SESSION_SCHEMA["properties"]}}
    named = ", ".join(f"`{p.id}` ({getattr(p, 'display_name', p.id)})" for p in agents)
    schema["properties"]["agent"] = {"type": "string", "enum": [p.id for p in agents],
                                     "description": f"The agent (provider id) to start: {named}; see list_agents."}
    return {"inputSchema": schema}


def title_strategy(session):
    """How the session's chats get their titles: `deferred` (the default: the host names a chat
    itself once it has something to go on), `utility` (a utility model does, and the agent
    never renames), or a strategy that reminds the agent to rename (`automatic`)."""
    return ((session.config or {}).get("titleStrategy") if session is not None else None) or "deferred"


def rename_chat_enabled(session):
    """Offered unless the session's titleStrategy is utility (the host names its chats itself)."""
    return title_strategy(session) != "utility"


def rename_chat_wording(session):
    """Under the deferred title strategy no reminder comes: no `automatic`."""
    if title_strategy(session) != "deferred":
        return None
    properties = {k: v for k, v in RENAME_CHAT_SCHEMA["properties"].items() if k != "automatic"}
    return {"inputSchema": {**RENAME_CHAT_SCHEMA, "properties": properties, "additionalProperties": False}}


READS, WRITES = frozenset({"reads"}), frozenset({"writes"})


def session_tool(name, title, description, executor, schema=None, writes=True, **extra):
    return Tool(name=name, title=title, description=description, executor=executor, group="session",
                input_schema=schema or {"type": "object", "properties": {}},
                annotations={"readOnlyHint": not writes, **extra.pop("annotations", {})},
                effects=WRITES if writes else READS, **extra)


SESSION_TOOLS = (
    session_tool("list_sessions", "List Sessions",
                 "List sessions and their compact metadata (status, working directory, timestamps, chats). "
                 "Each row has `session` for tool inputs and `openLink` for Markdown links. Archived sessions "
                 "are omitted unless asked for.",
                 listing.list_sessions, LIST_SESSIONS_SCHEMA, writes=False, sessionless=True, grant="session:read"),
    session_tool("list_agents", "List Agents",
                 "List the agents a new session may start on: id, display name, the settings its config "
                 "accepts and its first models.",
                 listing.list_agents, writes=False, sessionless=True, grant="session:read", defer_loading=True),
    session_tool("list_models", "List Models", "List one agent's models when named, every agent's otherwise.",
                 listing.list_models, LIST_MODELS_SCHEMA, writes=False, sessionless=True, grant="session:read",
                 defer_loading=True),
    session_tool("get_current_session", "Get Current Session",
                 "Get metadata and the open link of the session this conversation runs in.",
                 listing.get_current_session, writes=False),
    session_tool("get_session_context", "Get Session Context",
                 "Read the recent conversation of a session or chat: its newest turns at `summary` (default), "
                 "`digest` or `full` detail. A reply cut short names the `responseTurnId` that reads it whole.",
                 context.get_session_context, GET_SESSION_CONTEXT_SCHEMA, writes=False, sessionless=True,
                 grant="session:read"),
    session_tool("send_message", "Send Message",
                 "Send a message to a session or chat, starting a turn there; queued when the chat is busy. "
                 "Delivery is asynchronous: this does not wait for the reply.",
                 orchestration.send_message, SEND_MESSAGE_SCHEMA, sessionless=True, grant="session:write"),
    session_tool("create_session", "Create Session", "Create delegated work and start it with an initial prompt.",
                 orchestration.create_session, CREATE_SESSION_SCHEMA, sessionless=True, grant="session:write",
                 for_session=create_session_wording),
    session_tool("create_chat", "Create Chat", "Add a chat to this or another session, optionally starting it.",
                 orchestration.create_chat, CREATE_CHAT_SCHEMA, sessionless=True, grant="session:write",
                 defer_loading=True),
    session_tool("rename_chat", "Rename Chat",
                 "Rename one chat. Renaming a session's main chat also names the session. Omit `chat` to "
                 "rename the chat this runs in.",
                 orchestration.rename_chat, RENAME_CHAT_SCHEMA, sessionless=True, grant="session:write",
                 for_session=rename_chat_wording, is_enabled_for_session=rename_chat_enabled),
    session_tool("archive_chat", "Archive Chat",
                 "Archive a nested chat, or a whole session by its main chat or session link.",
                 orchestration.archive_chat, ARCHIVE_CHAT_SCHEMA, sessionless=True, grant="session:write",
                 defer_loading=True),
    session_tool("set_workspace", "Set Workspace",
                 "Attach a workspace folder (or a new Git worktree of it) to this session. It takes effect when "
                 "this turn completes. Make this the turn's final tool call.",
                 workspace.set_workspace, SET_WORKSPACE_SCHEMA, defer_loading=workspace.started_with_workspace),
    session_tool("isolate_session", "Isolate Chat",
                 "Move only this chat to a new Git worktree cut from its folder, when this turn completes. "
                 "Make this the final tool call and end the turn after it.",
                 workspace.isolate_session, {"type": "object", "properties": {}, "additionalProperties": False},
                 availability="userChats", defer_loading=True,
                 is_enabled_for_session=workspace.keeps_folder_per_chat),
    session_tool("delete_session", "Delete Session",
                 "Permanently delete a session. Only its owner may; refuses the current session.",
                 orchestration.delete_session, DELETE_SESSION_SCHEMA, sessionless=True, grant="session:write",
                 annotations={"destructiveHint": True}),
    session_tool("move_session", "Move Session",
                 "Reorder a nested session (`after`), nest it into another session (`into`), or make it "
                 "`independent`.",
                 orchestration.move_session, MOVE_SESSION_SCHEMA, sessionless=True, grant="session:write",
                 defer_loading=True),
)
