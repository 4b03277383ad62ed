"""The rows of a conversation, a module per purpose; callers import them from here."""
from ..tools_endpoint import ToolsEndpoint  # noqa: E402  (a model of this app, in a module of its own)
from .action_log import ActionLog, ServerSeq
from .chats import (
    Chat,
    ChatBackend,
    ChatDraft,
    ChatMove,
    PendingMessage,
    Turn,
    TurnEffect,
    TurnQuerySet,
)
from .processes import ClientConnection, HostProcess, SessionHome
from .sessions import (
    CHAT_URI_PREFIX,
    PUBLISHED_TOOLS,
    SESSION_URI_PREFIX,
    OrchestrationCharge,
    Session,
    SessionManager,
    SessionPlacement,
    SessionQuerySet,
    iso,
)
from .tool_calls import ActiveClient, ToolCall

__all__ = [
    "CHAT_URI_PREFIX", "PUBLISHED_TOOLS", "SESSION_URI_PREFIX", "ActionLog", "ActiveClient", "Chat", "ChatBackend",
    "ChatDraft", "ChatMove", "ClientConnection", "HostProcess", "OrchestrationCharge", "PendingMessage", "ServerSeq",
    "Session", "SessionHome", "SessionManager", "SessionPlacement", "SessionQuerySet", "ToolCall", "ToolsEndpoint",
    "Turn", "TurnEffect", "TurnQuerySet", "iso",
]
