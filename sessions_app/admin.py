from django.contrib import admin

from grants.admin import TenantScopedAdmin

from .models import Chat, Session, ToolCall, Turn


@admin.register(Session)
class SessionAdmin(TenantScopedAdmin):
    list_display = ("id", "title", "tenant", "provider", "owner", "depth", "archived", "modified")
    list_filter = ("tenant", "provider", "archived")
    search_fields = ("title",)
    raw_id_fields = ("parent", "root", "owner")


@admin.register(Chat)
class ChatAdmin(TenantScopedAdmin):
    list_display = ("id", "title", "session", "is_default", "origin_kind", "archived")
    list_filter = ("origin_kind", "archived")
    raw_id_fields = ("session", "origin_chat")


@admin.register(Turn)
class TurnAdmin(TenantScopedAdmin):
    list_display = ("id", "chat", "sender", "state", "started", "ended")
    list_filter = ("state",)
    raw_id_fields = ("chat", "sender")


@admin.register(ToolCall)
class ToolCallAdmin(TenantScopedAdmin):
    list_display = ("id", "tool_name", "status", "contributor_client_id", "created", "completed")
    list_filter = ("status",)
    raw_id_fields = ("turn",)
