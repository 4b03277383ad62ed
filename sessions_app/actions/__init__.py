"""Every change to sessions, chats, turns, tool calls and clients: one `do_*` function each, in
the module of its noun, which checks the grant, writes in one transaction and publishes the AHP
action(s) clients see. Callers outside sessions_app use the names here.

A `do_*` takes who acts first (a grants Principal; absent where the host acts on its own: a
turn's end, a sweep), then the row it changes, then what changes, and last, keyword-only,
`origin`: the client action it answers (echoed in its envelope). It refuses only with kernel.refusals.Refused, whose
sentence is what the person sees and whose kind picks each door's error code."""
from .chats import (
    ChatOrigin,
    do_archive_chat,
    do_copy_session_fork,
    do_create_chat,
    do_dispose_chat,
    do_move_chat,
    do_remove_chat_working_directory,
    do_rename_chat,
    do_set_chat_draft,
    do_set_chat_working_directory,
)
from .checks import MAX_MESSAGE_CHARS, check_message_text, check_working_directory, require
from .clients import (
    do_close_connections,
    do_open_connections,
    do_release_client,
    do_remove_active_client,
    do_set_active_client,
    do_set_subscriptions,
)
from .effects import (
    do_add_turn_effect,
    do_set_chat_folder,
    do_set_session_workspace,
    drop_turn_effect,
    pending_turn_effects,
)
from .orchestration import (
    MAX_SPAWN_DEPTH,
    ORCHESTRATION_LIMITS,
    ORCHESTRATION_WINDOW,
    Orchestration,
    do_tool_create_chat,
    do_tool_create_session,
    do_tool_send_message,
)
from .pending import (
    do_remove_pending_message,
    do_reorder_queued_messages,
    do_send_message,
    do_set_pending_message,
    do_start_queued_turn,
)
from .sessions import (
    do_add_working_directory,
    do_change_session_config,
    do_create_session,
    do_dispose_session,
    do_move_session,
    do_remove_working_directory,
    do_set_default_chat,
    do_set_flag,
    do_set_server_tools,
    do_set_title,
)
from .subagents import do_end_subagent, do_start_subagent
from .tool_calls import (
    do_ask_about_tool_call,
    do_begin_tool_call,
    do_client_complete_tool_call,
    do_client_tool_call_content,
    do_complete_tool_call,
    do_confirm_tool_call,
    do_expire_tool_call,
    do_refuse_tool_call,
    failure,
)
from .tools_endpoints import ENDPOINT_TURN_CLIENT_ID, do_end_quiet_endpoint_turn, do_open_tools_endpoint
from .turns import do_cancel_turn, do_end_turn, do_notify_turn, do_start_turn, do_stream_reply, do_truncate_chat

__all__ = [
    "ChatOrigin", "ENDPOINT_TURN_CLIENT_ID", "do_end_quiet_endpoint_turn",
    "MAX_MESSAGE_CHARS", "MAX_SPAWN_DEPTH", "ORCHESTRATION_LIMITS", "ORCHESTRATION_WINDOW", "Orchestration",
    "check_message_text", "check_working_directory", "do_add_turn_effect", "do_add_working_directory",
    "do_client_tool_call_content", "do_remove_chat_working_directory", "do_remove_working_directory",
    "do_set_chat_working_directory", "do_archive_chat",
    "do_ask_about_tool_call", "do_begin_tool_call", "do_cancel_turn", "do_change_session_config",
    "do_client_complete_tool_call", "do_close_connections", "do_complete_tool_call", "do_confirm_tool_call",
    "do_copy_session_fork", "do_create_chat", "do_create_session", "do_dispose_chat", "do_dispose_session", "do_end_subagent",
    "do_end_turn", "do_expire_tool_call", "do_move_chat", "do_move_session", "do_notify_turn", "do_open_connections",
    "do_open_tools_endpoint", "do_refuse_tool_call", "do_release_client", "do_remove_active_client",
    "do_remove_pending_message",
    "do_rename_chat", "do_reorder_queued_messages", "do_send_message", "do_set_active_client",
    "do_set_chat_draft", "do_set_chat_folder", "do_set_default_chat", "do_set_flag", "do_set_pending_message",
    "do_set_server_tools", "do_set_session_workspace", "do_set_subscriptions", "do_set_title",
    "do_start_queued_turn", "do_start_subagent", "do_start_turn", "do_stream_reply", "do_tool_create_chat",
    "do_tool_create_session", "do_tool_send_message", "do_truncate_chat", "drop_turn_effect", "failure",
    "pending_turn_effects", "require",
]
