from django import forms
from django.contrib import admin

from grants.admin import TenantScopedAdmin
from grants.models import Principal

from .actions import do_save_agent_definition
from .models import AgentDefinition, HostConfig


@admin.register(HostConfig)
class HostConfigAdmin(TenantScopedAdmin):
    list_display = ("tenant", "session_tools", "advanced_tools", "agent_orchestration_limits")


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
        acting = Principal.root(obj.tenant) if request.user.is_superuser else Principal.for_person(obj.tenant, request.user)
        saved = do_save_agent_definition(
            obj.tenant, obj.document(), acting=acting, definition=obj if change else None
        )
        obj.pk = saved.pk
