from typing import Any

from django import forms
from django.contrib import admin
from django.db.models import Field, Model
from django.http import HttpRequest

from kernel.admin_deletes import DeletesThroughActions

from .actions import do_delete_outbound_allow, do_save_outbound_allow
from .models import OutboundAllow
from .rules import HELP


class SuperuserOnlyAdmin(admin.ModelAdmin):
    """Host-wide settings: a tenant admin neither sees nor edits them."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return self.has_module_permission(request)

    has_change_permission = has_view_permission
    has_delete_permission = has_view_permission

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.has_module_permission(request)


@admin.register(OutboundAllow)
class OutboundAllowAdmin(DeletesThroughActions[OutboundAllow], SuperuserOnlyAdmin):
    list_display = ("entry", "note", "created")
    fields = ("entry", "note")

    def formfield_for_dbfield(self, db_field: Field, request: HttpRequest, **kwargs: Any) -> forms.Field | None:
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "entry" and field is not None:
            field.help_text = HELP  # the model's says less, and changing it there is a migration
        return field

    def save_model(self, request: HttpRequest, obj: OutboundAllow, form: Any, change: bool) -> None:
        do_save_outbound_allow(obj)

    def delete_row(self, allow: OutboundAllow) -> None:
        do_delete_outbound_allow(allow)
