from django.contrib import admin

from grants.admin import TenantScopedAdmin

from .models import HostConfig


@admin.register(HostConfig)
class HostConfigAdmin(TenantScopedAdmin):
    list_display = ("tenant", "session_tools", "advanced_tools", "agent_orchestration_limits")
