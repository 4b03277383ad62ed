"""Every change to tenants, people and tokens goes through one function here."""
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from .models import BUILTIN_ROLES, ApiToken, Membership, Tenant


def do_create_tenant(slug, name=None):
    if Tenant.objects.filter(slug=slug).exists():
        raise ValidationError(f"Tenant {slug} already exists.")
    tenant = Tenant(slug=slug, name=name or slug)
    tenant.full_clean()
    tenant.save()
    return tenant


@transaction.atomic
def do_add_member(tenant, username, role):
    """Make `username` (created if missing) a member of `tenant` with `role`."""
    if role not in BUILTIN_ROLES and not tenant.roles.filter(name=role).exists():
        raise ValidationError(f"Tenant {tenant.slug} has no role {role}.")
    person, _ = get_user_model().objects.get_or_create(username=username)
    membership, _ = Membership.objects.update_or_create(tenant=tenant, person=person, defaults={"role": role})
    return membership


def do_mint_token(tenant, person=None, name=None):
    """Answer (row, plaintext). A person's token needs the person to belong to the tenant."""
    if person is not None and not Membership.objects.filter(tenant=tenant, person=person).exists():
        raise ValidationError(f"{person.username} is not a member of {tenant.slug}.")
    if name and ApiToken.objects.filter(tenant=tenant, name=name).exists():
        raise ValidationError(f"Tenant {tenant.slug} already has a token named {name}.")
    return ApiToken.mint(tenant, person=person, name=name)


def do_revoke_token(tenant, name):
    revoked = ApiToken.objects.for_tenant(tenant).filter(name=name, revoked__isnull=True).update(revoked=timezone.now())
    if not revoked:
        raise ValidationError(f"Tenant {tenant.slug} has no live token named {name}.")
