import copy

from asgiref.sync import async_to_sync
from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import path
from django.utils.html import escape

from agents.harness import host_connection
from agents.model_check import model_problem
from agents.registry import PROVIDERS, provider_choices
from grants.admin import TenantScopedAdmin, admin_principal, administered_tenants
from kernel.refusals import Refused

from .actions import do_change_host_config, do_delete_agent_definition, do_save_agent_definition
from .agent_connection_rows import ConnectionRowFormSet
from .agent_connection_rows import from_rows as connections_from_rows
from .agent_connection_rows import to_rows as connection_rows
from .agent_connections import opened_connection
from .config import KEYS, ConfigInvalid, HostConfig, apply_changes, checked_changes, wire_values
from .credentials import masked_mcp_servers
from .destinations import unreachable_endpoints
from .families.mcp_servers.forms import ServerRowFormSet, check_server, from_rows, to_rows
from .models import AgentDefinition
from .rows_field import RowsField


def _ms_field(key):
    try:
        key.check(None)
    except ConfigInvalid as refusal:
        sentence = str(refusal)  # the sentence the socket and REST refuse a bad value with
    return forms.IntegerField(error_messages={"invalid": sentence, "required": sentence})


class PluginsField(forms.MultipleChoiceField):
    """plugins as the providers ticked to take none of the host's own tools (hostTools false)."""

    def __init__(self):
        super().__init__(choices=provider_choices, required=False, widget=forms.CheckboxSelectMultiple)

    def prepare_value(self, value):
        if isinstance(value, dict):
            return [name for name, settings in value.items() if settings.get("hostTools") is False]
        return value

    def has_changed(self, initial, data):
        return super().has_changed(self.prepare_value(initial), data)

    def clean(self, value):
        return {name: {"hostTools": False} for name in super().clean(value)} or None


# How the admin edits each kind of value; labels and help texts come from the key. An object
# valued kind is a RowsField: one row of a small form per entry.
FORM_FIELDS = {
    "boolean": lambda key: forms.BooleanField(required=False),
    "providers": lambda key: forms.MultipleChoiceField(choices=provider_choices, required=False,
                                                       widget=forms.CheckboxSelectMultiple),
    "servers": lambda key: RowsField(ServerRowFormSet, to_rows, from_rows),
    "connections": lambda key: RowsField(ConnectionRowFormSet, connection_rows, connections_from_rows),
    "plugins": lambda key: PluginsField(),
    "milliseconds": _ms_field,
    "choice": lambda key: forms.ChoiceField(choices=key.choices),
}
# What the admin adds to a key's help text, for the way its form field is filled in.
FORM_HINTS = {
    "providers": "Tick none for every provider.",
    "servers": "One row per server; tick Delete to remove one, fill the empty row to add one. "
               "A saved server's check link lists its tools as a new session would.",
    "plugins": "Tick the providers whose sessions take none of the host's own tools.",
    "connections": "One row per provider; a field applies to the providers its help names. Tick Delete to "
                   "remove one, fill the empty row to add one.",
}


def form_field(key):
    field = FORM_FIELDS[key.kind](key)
    field.label = f"{key.title} ({key.wire})"
    # The admin shows help texts as HTML.
    field.help_text = escape(" ".join(filter(None, [key.description, FORM_HINTS.get(key.kind)])))
    return field


class HostConfigForm(forms.ModelForm):
    """Every HostConfig key under its wire name (dots left out). The values are checked by
    tools_app.config (the same checks as the socket and REST), and a refusal lands on the field
    it names."""

    locals().update({key.form_name: form_field(key) for key in KEYS})  # one field per key

    class Meta:
        model = HostConfig
        fields = ("tenant",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        values = wire_values(self.instance)  # an unsaved instance holds the defaults
        for key in KEYS:
            self.initial[key.form_name] = values[key.wire]
        # A provider set over REST that this host does not run stays listed, so a save keeps it.
        providers = self.fields["sessionToolsProviders"]
        unknown = [p for p in values["sessionToolsProviders"] if p not in PROVIDERS]
        providers.choices = [*provider_choices(), *((p, f"{p} (not on this host)") for p in unknown)]

    @classmethod
    def wire_fields(cls):
        return [key.form_name for key in KEYS]

    def clean(self):
        data = super().clean()
        for key in KEYS:
            if key.form_name not in data or not self.changes_key(key):
                continue  # already refused by the field itself, or kept as it is
            try:
                key.check(data[key.form_name])
            except ConfigInvalid as invalid:
                self.add_error(key.form_name, str(invalid))
        if not self.errors:
            try:  # what the save would store, measured and judged as every door does
                apply_changes(copy.copy(self.instance), checked_changes(self.changes()))
            except ConfigInvalid as invalid:
                self.add_error(None, str(invalid))
        return data

    def changes_key(self, key):
        return key.form_name in self.changed_data or not self.instance.pk

    def changes(self):
        """The wire keys this save changes, with their new values."""
        return {key.wire: self.cleaned_data[key.form_name] for key in KEYS if self.changes_key(key)}


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

    def has_add_permission(self, request):
        # Only a tenant that has none yet gets one: each tenant has exactly one.
        return self._may(request, None) and self._unconfigured(request).exists()

    def _unconfigured(self, request):
        return administered_tenants(request.user).filter(host_config__isnull=True)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        field = super().formfield_for_foreignkey(db_field, request, **kwargs)
        if db_field.name == "tenant":
            field.queryset = self._unconfigured(request)
        return field

    def get_urls(self):
        check = path("<path:object_id>/change/check-mcp/<str:name>/", self.admin_site.admin_view(self.check_mcp),
                     name="tools_app_hostconfig_check_mcp")
        check_model = path("<path:object_id>/change/check-model/<str:provider>/",
                           self.admin_site.admin_view(self.check_model), name="tools_app_hostconfig_check_model")
        return [check, check_model, *super().get_urls()]

    def check_model(self, request, object_id, provider):
        """A one-token request to the provider's model as a turn of the tenant would make it (its
        key, through the outbound rules), answering success or the sentence a turn would fail with."""
        config = self.get_object(request, object_id)
        if config is None or not self.has_change_permission(request, config) or provider not in PROVIDERS:
            raise Http404("No such host configuration or provider.")
        try:
            connection = opened_connection(config.agent_connections, provider, host_connection(provider))
            problem = async_to_sync(model_problem)(provider, connection)
        except Refused as refused:
            connection, problem = {}, refused.sentence
        context = {**self.admin_site.each_context(request), "title": f"Model of {provider}", "config": config,
                   "provider": provider, "base_url": connection.get("baseUrl"), "problem": problem,
                   "opts": self.model._meta}
        return TemplateResponse(request, "admin/tools_app/hostconfig/check_model.html", context)

    def check_mcp(self, request, object_id, name):
        """Connect to one saved MCP server as a new session of the tenant would, and show its
        tools or why it could not be listed."""
        config = self.get_object(request, object_id)
        if config is None or not self.has_change_permission(request, config):
            raise Http404("No such host configuration.")
        entry = (config.mcp_servers or {}).get(name)
        if entry is None:
            raise Http404("No such MCP server.")
        tools, error = check_server(entry, config.tenant)
        context = {**self.admin_site.each_context(request), "title": f"MCP server {name}", "config": config,
                   "name": name, "entry": masked_mcp_servers({name: entry})[name], "tools": tools, "error": error,
                   "opts": self.model._meta}
        return TemplateResponse(request, "admin/tools_app/hostconfig/check_mcp.html", context)

    def save_model(self, request, obj, form, change):
        # Saving applies live: do_change_host_config tells root subscribers and every running
        # session whose offered tools changed.
        changes = form.changes()
        if changes or not change:
            saved = do_change_host_config(admin_principal(request.user, obj.tenant), changes)
            obj.pk = saved.pk
            for sentence in unreachable_endpoints(saved):
                messages.warning(request, sentence)


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

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.initial.get("tools") is None:
            self.initial["tools"] = []  # the box starts as the empty list it saves as

    def clean_tools(self):
        return self.cleaned_data["tools"] if self.cleaned_data["tools"] is not None else []


def _admin_refusal(refused: Refused) -> Exception:
    """The admin's answer to an action's refusal: its 403 page for a missing grant; anything
    else its form checked first, so only a race gets here."""
    return PermissionDenied(refused.sentence) if refused.kind == "permission" else refused


@admin.register(AgentDefinition)
class AgentDefinitionAdmin(TenantScopedAdmin):
    form = AgentDefinitionForm
    list_display = ("name", "tenant", "provider", "model", "modified")
    list_filter = ("tenant", "provider")
    search_fields = ("name",)

    def save_model(self, request, obj, form, change):
        # The admin already decided this person administers obj.tenant; act as them there.
        acting = admin_principal(request.user, obj.tenant)
        try:
            saved = do_save_agent_definition(
                obj.tenant, obj.document(), acting=acting, definition=obj if change else None
            )
        except Refused as refused:
            raise _admin_refusal(refused) from None
        obj.pk = saved.pk

    def delete_model(self, request, obj):
        try:
            do_delete_agent_definition(obj, acting=admin_principal(request.user, obj.tenant))
        except Refused as refused:
            raise _admin_refusal(refused) from None

    def delete_queryset(self, request, queryset):
        for definition in queryset.select_related("tenant"):
            self.delete_model(request, definition)


from .families.mcp_servers import admin as mcp_servers_admin  # noqa: E402,F401  (registers its admins)
