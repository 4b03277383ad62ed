"""Read-only browsers over what clients and agents made: sessions by tree, chats by origin,
turns, and tool calls with who ran them, how long they took and what came of them."""
from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from grants.admin import TenantScopedAdmin

from .models import Chat, Session, ToolCall, ToolsEndpoint, Turn


def _link(obj, label=None):
    if obj is None:
        return "—"
    url = reverse(f"admin:sessions_app_{obj._meta.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, label or str(obj))


class ReadOnlyBrowser(TenantScopedAdmin):
    """Rows here are written by the protocol's `do_*` functions only; the admin shows them."""

    def get_readonly_fields(self, request, obj=None):
        return [f.name for f in self.model._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False  # a view page: saving would write the row past its do_* functions

    def has_delete_permission(self, request, obj=None):
        return False


class TreeFilter(admin.SimpleListFilter):
    """One session tree: a session nothing started and everything grown from it."""

    title = "session tree"
    parameter_name = "tree"

    def lookups(self, request, model_admin):
        roots = model_admin.get_queryset(request).filter(parent__isnull=True, tree__depth__gt=0).distinct()
        return [(str(s.pk), str(s)) for s in roots.order_by("-modified")[:30]]

    def queryset(self, request, queryset):
        return queryset.filter(root_id=self.value()) if self.value() else queryset


@admin.register(Session)
class SessionAdmin(ReadOnlyBrowser):
    list_display = ("__str__", "tenant", "provider", "owner", "parent_link", "tree_link", "depth", "archived",
                    "modified")
    list_filter = ("tenant", TreeFilter, "depth", "provider", "archived")
    search_fields = ("title", "id")
    list_select_related = ("tenant", "owner", "parent", "root")
    ordering = ("-modified",)

    @admin.display(description="parent")
    def parent_link(self, session):
        return _link(session.parent)

    @admin.display(description="tree")
    def tree_link(self, session):
        if session.root_id is None:
            return "—"
        url = reverse("admin:sessions_app_session_changelist") + f"?tree={session.root_id}"
        return format_html('<a href="{}">{}</a>', url, str(session.root) if session.root else session.root_id)


@admin.register(Chat)
class ChatAdmin(ReadOnlyBrowser):
    list_display = ("created", "__str__", "session_link", "origin", "is_default", "archived")
    list_filter = ("session__tenant", "origin_kind", "is_default", "archived")
    list_select_related = ("session", "origin_chat")
    search_fields = ("title", "id", "session__id")
    ordering = ("-created",)

    @admin.display(description="session")
    def session_link(self, chat):
        return _link(chat.session)

    @admin.display(description="origin")
    def origin(self, chat):
        if chat.origin_kind == "user":
            return "started by a person"
        via = f"tool call {chat.origin_tool_call_id}" if chat.origin_kind == "tool" else f"turn {chat.origin_turn_id}"
        return format_html("{} of {} ({})", chat.get_origin_kind_display(), _link(chat.origin_chat), via)


@admin.register(Turn)
class TurnAdmin(ReadOnlyBrowser):
    list_display = ("started", "session_link", "message", "sender", "client_id", "state", "duration")
    list_filter = ("chat__session__tenant", "state")
    list_select_related = ("chat__session", "sender")
    ordering = ("-started",)

    @admin.display(description="session")
    def session_link(self, turn):
        return _link(turn.chat.session)

    @admin.display(description="message")
    def message(self, turn):
        return format_html('<a href="{}">{}</a>', reverse("admin:sessions_app_turn_change", args=[turn.pk]),
                           Truncator(turn.text).chars(60) or "(empty)")

    @admin.display(description="duration")
    def duration(self, turn):
        return "running" if turn.ended is None else f"{(turn.ended - turn.started).total_seconds():.1f} s"


def outcome(call):
    """What came of a call, as the chat shows it."""
    if not call.is_terminal:
        return "waiting for its client" if call.contributor_client_id else "running"
    if call.status == "cancelled":
        return "cancelled"
    if (call.result or {}).get("success"):
        return "ok"
    return Truncator(f"failed: {((call.result or {}).get('error') or {}).get('message', '')}").chars(90)


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyBrowser):
    list_display = ("created", "tool_name", "source", "status", "contributor_client_id", "duration", "call_outcome",
                    "chat_link")
    list_filter = ("tenant", "status", "source", "created")
    search_fields = ("tool_name", "contributor_client_id")
    list_select_related = ("turn__chat",)
    date_hierarchy = "created"
    ordering = ("-created",)

    @admin.display(description="duration")
    def duration(self, call):
        if call.completed is None:
            return "—"
        return f"{(call.completed - call.created).total_seconds() * 1000:.0f} ms"

    @admin.display(description="outcome")
    def call_outcome(self, call):
        return outcome(call)

    @admin.display(description="chat")
    def chat_link(self, call):
        if not call.turn_id:
            return "no session"  # POST /api/v1/tools/<name>
        chat = call.turn.chat
        return _link(chat, chat.title or str(chat.pk)[:8])


@admin.register(ToolsEndpoint)
class ToolsEndpointAdmin(TenantScopedAdmin):
    list_display = ("__str__", "api_token", "created")
    fields = ("session", "api_token", "created")
    readonly_fields = fields

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
