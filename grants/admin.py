from django import forms
from django.contrib import admin, messages
from django.contrib.admin.utils import NotRelationField, get_fields_from_path
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.core.exceptions import FieldDoesNotExist
from django.template.response import TemplateResponse
from django.utils import timezone

from kernel.admin_deletes import DeletesThroughActions
from sandbox.workspaces import root_problem

from .actions import (
    NO_SUCH_ROLE,
    NOT_A_MEMBER,
    PAGE_TOKEN_PREFIX,
    TOKEN_NAME_TAKEN,
    do_add_member,
    do_delete_person,
    do_delete_role,
    do_delete_tenant,
    do_delete_token,
    do_mint_token,
    do_remove_member,
    do_revoke_token,
    do_save_person,
    do_save_tenant,
    do_set_role,
)
from .algebra import holds
from .models import BUILTIN_ROLES, ApiToken, Membership, Principal, Role, Tenant


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


def admin_principal(user, tenant):
    """Who an admin user acts as in `tenant`: its root for a superuser, else the person with
    their role's grants there (the admin already checked they administer it)."""
    return Principal.root(tenant) if user.is_superuser else Principal.for_person(tenant, user)


def tenant_of(obj, path):
    for hop in path.split("__"):
        obj = getattr(obj, hop)
    return obj


class AdministeredTenantFilter(admin.RelatedFieldListFilter):
    """A list filter on a tenant that offers only the tenants the admin administers: the
    default one lists every tenant's name."""

    def field_choices(self, field, request, model_admin):
        return [(t.pk, str(t)) for t in administered_tenants(request.user).order_by("slug")]


def _leads_to_tenant(model, path):
    try:
        return get_fields_from_path(model, path)[-1].related_model is Tenant
    except (FieldDoesNotExist, NotRelationField):
        return False


class TenantScopedAdmin(admin.ModelAdmin):
    """A tenant admin sees and edits only their tenants' rows; a superuser sees all."""

    def get_list_filter(self, request):
        return [(f, AdministeredTenantFilter) if isinstance(f, str) and _leads_to_tenant(self.model, f) else f
                for f in super().get_list_filter(request)]

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


class TenantForm(forms.ModelForm):
    class Meta:
        model = Tenant
        fields = ("slug", "name", "created", "workspace_root")

    def clean_workspace_root(self):
        root = self.cleaned_data["workspace_root"].strip()
        if root and root_problem(root):
            raise forms.ValidationError(root_problem(root))
        return root


@admin.register(Tenant)
class TenantAdmin(DeletesThroughActions, TenantScopedAdmin):
    form = TenantForm
    list_display = ("slug", "name", "created")
    search_fields = ("slug", "name")

    def get_queryset(self, request):
        return administered_tenants(request.user)

    def get_readonly_fields(self, request, obj=None):
        # Where a tenant's folders live on the host is the operator's decision.
        return () if request.user.is_superuser else ("workspace_root",)

    def _may(self, request, obj):
        if obj is None:
            return super()._may(request, None)
        return request.user.is_superuser or administered_tenants(request.user).filter(pk=obj.pk).exists()

    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser

    def save_model(self, request, obj, form, change):
        do_save_tenant(obj)

    def delete_row(self, tenant):
        do_delete_tenant(tenant)


@admin.register(Role)
class RoleAdmin(DeletesThroughActions, TenantScopedAdmin):
    list_display = ("name", "tenant", "grants")
    list_filter = ("tenant",)

    # Through the grants functions, so open sockets of the role's holders get the new grants.
    def save_model(self, request, obj, form, change):
        if change and "name" in form.changed_data:
            do_delete_role(obj.tenant, form.initial["name"])
        saved = do_set_role(obj.tenant, obj.name, obj.grants)
        obj.pk = saved.pk

    delete_related = ("tenant",)

    def delete_row(self, role):
        do_delete_role(role.tenant, role.name)


class MembershipForm(forms.ModelForm):
    """Add a person by name (created when new) or change their role; do_add_member checks the
    role exists in the tenant."""

    username = forms.CharField(max_length=150, help_text="The person's login; a new name creates the person.")
    role = forms.CharField(max_length=50, help_text="admin, member, guest, or a role the tenant defines.")

    class Meta:
        model = Membership
        fields = ("tenant", "username", "role")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["username"].initial = self.instance.person.username
            self.fields["username"].disabled = True

    def clean(self):
        data = super().clean()
        tenant = data.get("tenant") or getattr(self.instance, "tenant", None)
        role = data.get("role")
        if tenant and role and role not in BUILTIN_ROLES and not tenant.roles.filter(name=role).exists():
            self.add_error("role", NO_SUCH_ROLE.format(tenant=tenant.slug, role=role))
        username = data.get("username")
        if not self.instance.pk and tenant and username:
            held = Membership.objects.filter(tenant=tenant, person__username=username).first()
            if held:
                self.add_error("username", f"{username} is already a member of {tenant.slug}, as {held.role}; "
                                           "change their role on their membership's page.")
        return data

    def _post_clean(self):
        pass  # the row is written by do_add_member, which checks it


@admin.register(Membership)
class MembershipAdmin(DeletesThroughActions, TenantScopedAdmin):
    form = MembershipForm
    list_display = ("person", "tenant", "role")
    list_filter = ("tenant", "role")
    search_fields = ("person__username",)

    def get_readonly_fields(self, request, obj=None):
        return ("tenant",) if obj else ()

    def save_model(self, request, obj, form, change):
        tenant = obj.tenant if change else form.cleaned_data["tenant"]
        saved = do_add_member(tenant, form.cleaned_data["username"], form.cleaned_data["role"])
        obj.pk, obj.person, obj.tenant, obj.role = saved.pk, saved.person, saved.tenant, saved.role

    delete_related = ("tenant", "person")

    # Through do_remove_member, so the person's open sockets in the tenant close.
    def delete_row(self, membership):
        do_remove_member(membership.tenant, membership.person)


MINT_ROOT_LABEL = "the tenant's root token"
NO_PERSON = f"Choose the person the token acts as, or tick “{MINT_ROOT_LABEL}”."
PERSON_AND_ROOT = f"A token acts as one person or is the tenant's root token: choose the person or untick “{MINT_ROOT_LABEL}”."


class MintTokenForm(forms.ModelForm):
    person = forms.ModelChoiceField(
        queryset=get_user_model().objects.none(), required=False,
        help_text="The token acts as this person, with their grants in the tenant.")
    root = forms.BooleanField(required=False, label=MINT_ROOT_LABEL,
                              help_text="Instead of a person: a token holding every grant in the tenant.")
    name = forms.CharField(max_length=100, required=False, help_text="Empty: a name is made up.")
    expires = forms.DateTimeField(required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
                                  help_text="When it stops working by itself; empty for never.")

    class Meta:
        model = ApiToken
        fields = ("tenant", "person", "root", "name", "expires")

    def __init__(self, *args, tenants=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["tenant"].queryset = tenants
        self.fields["person"].queryset = get_user_model().objects.filter(
            memberships__tenant__in=tenants).distinct().order_by("username")

    def clean(self):
        data = super().clean()
        tenant, person = data.get("tenant"), data.get("person")
        if not person and not data.get("root"):
            self.add_error("person", NO_PERSON)
        if person and data.get("root"):
            self.add_error("root", PERSON_AND_ROOT)
        if data.get("expires") and data["expires"] <= timezone.now():
            self.add_error("expires", "The expiry must be in the future.")
        if tenant and person and not Membership.objects.filter(tenant=tenant, person=person).exists():
            self.add_error("person", NOT_A_MEMBER.format(person=person.username, tenant=tenant.slug))
        if tenant and data.get("name") and ApiToken.objects.filter(tenant=tenant, name=data["name"]).exists():
            self.add_error("name", TOKEN_NAME_TAKEN.format(tenant=tenant.slug, name=data["name"]))
        return data

    def _post_clean(self):
        pass  # the row is written by do_mint_token


@admin.register(ApiToken)
class ApiTokenAdmin(DeletesThroughActions, TenantScopedAdmin):
    list_display = ("name", "tenant", "person", "created", "last_used", "expires", "revoked")
    list_filter = ("tenant", ("revoked", admin.EmptyFieldListFilter))
    readonly_fields = ("tenant", "person", "name", "key_id", "created", "last_used", "expires", "revoked")
    exclude = ("secret_sha256",)
    actions = ("revoke",)

    def get_form(self, request, obj=None, **kwargs):
        if obj is not None:
            return super().get_form(request, obj, **kwargs)
        tenants = administered_tenants(request.user)

        class Form(MintTokenForm):
            def __init__(self, *args, **kw):
                super().__init__(*args, tenants=tenants, **kw)

        return Form

    def get_readonly_fields(self, request, obj=None):
        return self.readonly_fields if obj else ()

    def get_fields(self, request, obj=None):
        return self.readonly_fields if obj else MintTokenForm.Meta.fields

    def get_queryset(self, request):
        # A console page's own token ends by itself with the page; it is not the operator's to manage.
        return super().get_queryset(request).exclude(name__startswith=PAGE_TOKEN_PREFIX)

    def has_change_permission(self, request, obj=None):
        return False  # a token is minted or revoked, never edited

    def save_model(self, request, obj, form, change):
        data = form.cleaned_data
        row, plaintext = do_mint_token(data["tenant"], person=data["person"], name=data["name"] or None,
                                       expires=data["expires"])
        obj.pk, obj.tenant, obj.person, obj.name = row.pk, row.tenant, row.person, row.name
        request.minted_token = (row, plaintext)

    def response_add(self, request, obj, post_url_continue=None):
        """The plaintext is shown on this page once; only its sha256 is kept."""
        row, plaintext = request.minted_token
        context = {**self.admin_site.each_context(request), "title": f"Token {row.name} minted",
                   "token": row, "plaintext": plaintext, "opts": self.model._meta}
        return TemplateResponse(request, "admin/grants/apitoken/minted.html", context)

    @admin.action(description="Revoke the selected tokens", permissions=["revoke"])
    def revoke(self, request, queryset):
        live = [t for t in queryset.select_related("tenant") if t.revoked is None]
        for token in live:
            do_revoke_token(token.tenant, token.name)
        self.message_user(request, f"Revoked {len(live)} token(s).", messages.SUCCESS)

    def has_revoke_permission(self, request):
        return self._may(request, None)

    def delete_row(self, token):
        do_delete_token(token)


class PersonAdmin(DeletesThroughActions, UserAdmin):
    """Django's user admin, writing through do_save_person and do_delete_person, so deactivating
    or deleting a person closes their sockets."""

    def save_model(self, request, obj, form, change):
        do_save_person(obj)

    def delete_row(self, person):
        do_delete_person(person)


if admin.site.is_registered(get_user_model()):
    admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), PersonAdmin)
