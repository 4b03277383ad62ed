from django.contrib import admin

from .algebra import holds
from .models import ApiToken, Membership, Role, Tenant


def administered_tenants(user):
    """Tenants whose admin `user` is (a role holding every grant); every tenant for a superuser."""
    if user.is_superuser:
        return Tenant.objects.all()
    ids = [
        m.tenant_id
        for m in Membership.objects.filter(person_id=user.pk).select_related("tenant")
        if holds(m.tenant.role_grants(m.role), "*:*")
    ]
    return Tenant.objects.filter(id__in=ids)


def tenant_of(obj, path):
    for hop in path.split("__"):
        obj = getattr(obj, hop)
    return obj


class TenantScopedAdmin(admin.ModelAdmin):
    """A tenant admin sees and edits only their tenants' rows; a superuser sees all."""

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        return qs.filter(**{f"{self.model.tenant_path}__in": administered_tenants(request.user)})

    def _may(self, request, obj):
        if request.user.is_superuser:
            return True
        if not request.user.is_staff:
            return False
        tenants = administered_tenants(request.user)
        if obj is None:
            return tenants.exists()
        return tenants.filter(pk=tenant_of(obj, self.model.tenant_path).pk).exists()

    def has_module_permission(self, request):
        return self._may(request, None)

    def has_view_permission(self, request, obj=None):
        return self._may(request, obj)

    def has_change_permission(self, request, obj=None):
        return self._may(request, obj)

    def has_add_permission(self, request):
        return self._may(request, None)

    def has_delete_permission(self, request, obj=None):
        return self._may(request, obj)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "tenant":
            kwargs["queryset"] = administered_tenants(request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


@admin.register(Tenant)
class TenantAdmin(TenantScopedAdmin):
    list_display = ("slug", "name", "created")
    search_fields = ("slug", "name")

    def get_queryset(self, request):
        return administered_tenants(request.user)

    def _may(self, request, obj):
        if obj is None:
            return super()._may(request, None)
        return request.user.is_superuser or administered_tenants(request.user).filter(pk=obj.pk).exists()

    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser


@admin.register(Role)
class RoleAdmin(TenantScopedAdmin):
    list_display = ("name", "tenant", "grants")
    list_filter = ("tenant",)


@admin.register(Membership)
class MembershipAdmin(TenantScopedAdmin):
    list_display = ("person", "tenant", "role")
    list_filter = ("tenant", "role")
    search_fields = ("person__username",)


@admin.register(ApiToken)
class ApiTokenAdmin(TenantScopedAdmin):
    list_display = ("name", "tenant", "person", "created", "last_used", "revoked")
    list_filter = ("tenant",)
    readonly_fields = ("key_id", "secret_sha256", "created", "last_used")

    def has_add_permission(self, request):
        return False  # tokens are minted with `minttoken`, which shows the secret once
