from django import forms
from django.contrib import admin
from django.utils.html import escape

from grants.admin import TenantScopedAdmin, admin_principal

from .actions import do_change_host_config, do_save_agent_definition
from .config import KEYS, ConfigInvalid, HostConfig, wire_values
from .models import AgentDefinition


def _ms_field(key):
    try:
        key.check(None)
    except ConfigInvalid as refusal:
        sentence = str(refusal)  # the sentence the socket and REST refuse a bad value with
    return forms.IntegerField(error_messages={"invalid": sentence, "required": sentence})


class ProvidersField(forms.CharField):
    """A list of provider ids, written separated by commas."""

    def prepare_value(self, value):
        return ", ".join(value) if isinstance(value, list) else value

    def to_python(self, value):
        return [p.strip() for p in super().to_python(value).split(",") if p.strip()]


# How the admin edits each kind of value; labels and help texts come from the key.
FORM_FIELDS = {
    "boolean": lambda key: forms.BooleanField(required=False),
    "providers": lambda key: ProvidersField(required=False),
    "servers": lambda key: forms.JSONField(required=False, widget=forms.Textarea(attrs={"rows": 8, "cols": 80}),
                                           error_messages={"invalid": f"{key.wire} must be JSON."}),
    "connections": lambda key: forms.JSONField(required=False, widget=forms.Textarea(attrs={"rows": 6, "cols": 80}),
                                               error_messages={"invalid": f"{key.wire} must be JSON."}),
    "milliseconds": _ms_field,
    "choice": lambda key: forms.ChoiceField(choices=key.choices),
}
# What the admin adds to a key's help text, for the way its form field is filled in.
FORM_HINTS = {
    "providers": "Separate them with commas.",
    "servers": 'Write them as JSON {"name": {...}}.',
    "connections": 'Write them as JSON {"claude": {...}}.',
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

    @classmethod
    def wire_fields(cls):
        return [key.form_name for key in KEYS]

    def clean(self):
        data = super().clean()
        for key in KEYS:
            if key.form_name not in data:
                continue  # already refused by the field itself
            try:
                key.check(data[key.form_name])
            except ConfigInvalid as invalid:
                self.add_error(key.form_name, str(invalid))
        return data

    def changes(self):
        """The wire keys this save changes, with their new values."""
        return {key.wire: self.cleaned_data[key.form_name]
                for key in KEYS if key.form_name in self.changed_data or not self.instance.pk}


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
