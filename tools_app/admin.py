from django import forms
from django.contrib import admin

from grants.admin import TenantScopedAdmin, admin_principal

from .actions import do_change_host_config, do_save_agent_definition
from .host_config import ConfigInvalid, checked_changes, wire_values
from .models import AgentDefinition, HostConfig


def _ms_field(key, label, help_text):
    sentence = f"{key} must be a whole number of milliseconds, 0 or more."
    return forms.IntegerField(label=label, help_text=help_text, error_messages={"invalid": sentence, "required": sentence})


class HostConfigForm(forms.ModelForm):
    """Every HostConfig key under its wire name. The values are checked by host_config (the
    same checks as the socket and REST), and a refusal lands on the field it names."""

    sessionTools = forms.BooleanField(
        required=False, label="Session tools (sessionTools)",
        help_text="Offer the session tools (list, create and message sessions) to agents at all.")
    sessionToolsProviders = forms.CharField(
        required=False, label="Session tools providers (sessionToolsProviders)",
        help_text="Provider ids that get the session tools, separated by commas; empty means every provider.")
    advancedTools = forms.BooleanField(
        required=False, label="Advanced tools (advancedTools)",
        help_text="Offer tools that need advanced permission.")
    mcpServers = forms.JSONField(
        required=False, label="MCP servers (mcpServers)", widget=forms.Textarea(attrs={"rows": 8, "cols": 80}),
        help_text='MCP servers every new session is given, as JSON {"name": {...}}. Credentials (env and headers '
                  'values) read "&lt;set&gt;"; leave them so to keep them.',
        error_messages={"invalid": "mcpServers must be JSON."})
    clientToolTimeoutMs = _ms_field(
        "clientToolTimeoutMs", "Client tool timeout, ms (clientToolTimeoutMs)",
        "How long a client may take to run a tool before the call fails; 0 waits for ever. Default 600000.")
    clientToolCallDisconnectTimeoutMs = _ms_field(
        "clientToolCallDisconnectTimeoutMs", "Client disconnect grace, ms (clientToolCallDisconnectTimeoutMs)",
        "How long a vanished client keeps the calls it owes; 0 releases them at once. Default 30000.")
    agentOrchestrationLimits = forms.ChoiceField(
        choices=HostConfig.ORCHESTRATION_LIMITS, label="Agent orchestration limits (agentOrchestrationLimits)",
        help_text="on: spawn depth and per-hour counts of sessions, chats and messages are limited; off: neither.")
    agentOrchestrationLimitsScope = forms.ChoiceField(
        choices=HostConfig.ORCHESTRATION_SCOPES, label="Orchestration limits scope (agentOrchestrationLimitsScope)",
        help_text="tree: counts are kept per session tree; session: per session.")
    chatMovesEnabled = forms.BooleanField(
        required=False, label="Chat moves (chatMoves.enabled)", help_text="Allow moving chats and sessions.")

    FORM_KEYS = {"chatMovesEnabled": "chatMoves.enabled"}  # form field -> wire key, where they differ

    class Meta:
        model = HostConfig
        fields = ("tenant",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        values = wire_values(self.instance)  # an unsaved instance holds the defaults
        for name in self.wire_fields():
            value = values[self.FORM_KEYS.get(name, name)]
            self.initial[name] = ", ".join(value) if name == "sessionToolsProviders" else value

    @classmethod
    def wire_fields(cls):
        return [name for name in cls.base_fields if name != "tenant"]

    def clean_sessionToolsProviders(self):
        return [p.strip() for p in self.cleaned_data["sessionToolsProviders"].split(",") if p.strip()]

    def clean(self):
        data = super().clean()
        for name in self.wire_fields():
            if name not in data:
                continue  # already refused by the field itself
            key = self.FORM_KEYS.get(name, name)
            try:
                checked_changes({key: data[name]})
            except ConfigInvalid as invalid:
                self.add_error(name, str(invalid))
        return data

    def changes(self):
        """The wire keys this save changes, with their new values."""
        return {self.FORM_KEYS.get(name, name): self.cleaned_data[name]
                for name in self.wire_fields() if name in self.changed_data or not self.instance.pk}


@admin.register(HostConfig)
class HostConfigAdmin(TenantScopedAdmin):
    form = HostConfigForm
    list_display = ("tenant", "session_tools", "advanced_tools", "agent_orchestration_limits")

    def get_readonly_fields(self, request, obj=None):
        return ("tenant",) if obj else ()

    def get_fields(self, request, obj=None):
        return ["tenant", *HostConfigForm.wire_fields()]

    def has_delete_permission(self, request, obj=None):
        return False  # a tenant always has a configuration; set it back with the form instead

    def save_model(self, request, obj, form, change):
        # Saving applies live: do_change_host_config tells root subscribers and every running
        # session whose offered tools changed.
        changes = form.changes()
        if changes or not change:
            saved = do_change_host_config(admin_principal(request.user, obj.tenant), changes)
            obj.pk = saved.pk


class AgentDefinitionForm(forms.ModelForm):
    """The model's clean() runs the schema; its error lands on the field the JSON pointer
    names (tools, name, ...), worded exactly as the REST API and the exception word it."""

    tools = forms.JSONField(
        required=False, widget=forms.Textarea(attrs={"rows": 16, "cols": 100}),
        help_text=AgentDefinition._meta.get_field("tools").help_text,
    )

    class Meta:
        model = AgentDefinition
        fields = ("tenant", "name", "provider", "model", "instructions", "tools")

    def clean_tools(self):
        return self.cleaned_data["tools"] if self.cleaned_data["tools"] is not None else []


@admin.register(AgentDefinition)
class AgentDefinitionAdmin(TenantScopedAdmin):
    form = AgentDefinitionForm
    list_display = ("name", "tenant", "provider", "model", "modified")
    list_filter = ("tenant", "provider")
    search_fields = ("name",)

    def save_model(self, request, obj, form, change):
        # The admin already decided this person administers obj.tenant; act as them there.
        acting = admin_principal(request.user, obj.tenant)
        saved = do_save_agent_definition(
            obj.tenant, obj.document(), acting=acting, definition=obj if change else None
        )
        obj.pk = saved.pk


from .families.mcp_servers import admin as mcp_servers_admin  # noqa: E402,F401  (registers its admins)
