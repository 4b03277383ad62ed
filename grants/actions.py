"""Every change to tenants, people and tokens goes through one function here.

Open sockets follow these changes without waiting to speak: each function that takes access
away or changes it tells the sockets concerned after commit, through channel-layer groups every
socket joins (one per token, one per person). A revoked token, a deactivated person or a removed
membership closes them; a changed role has them read their grants again."""
import secrets
from datetime import timedelta

from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from kernel.after_commit import after_commit
from kernel.outbox import send_soon
from kernel.refusals import Refused

from . import liveness
from .models import BUILTIN_ROLES, ApiToken, Membership, Role, Tenant

# What each door shows when an action refuses (the admin's forms check the same first).
TENANT_EXISTS = "Tenant {slug} already exists."
NO_SUCH_ROLE = "Tenant {tenant} has no role {role}."
NOT_A_MEMBER = "{person} is not a member of {tenant}."
TOKEN_NAME_TAKEN = "Tenant {tenant} already has a token named {name}."
NO_LIVE_TOKEN = "Tenant {tenant} has no live token named {name}."


def token_group(token_id):
    """The group every socket opened with one token joins."""
    return f"token.{token_id}"


def person_group(person_id):
    """The group every socket of one person joins, in whichever tenant."""
    return f"person.{person_id}"


def _tell_sockets_after_commit(messages):
    """(group, message) pairs sent once the change commits. A channel layer that is down must not
    undo a committed revocation: this process's sockets re-read their token at their next
    message (liveness), other processes' at their heartbeat."""
    if not messages:
        return

    async def send_all():
        layer = get_channel_layer()
        for group, message in messages:
            await layer.group_send(group, message)

    def send():
        liveness.changed()
        send_soon("an access change", send_all)

    after_commit("telling sockets of an access change", send)


def _access_ended(group, tenant_id=None):
    return group, {"type": "ahp.access_ended", "tenant_id": tenant_id}


def _grants_changed(membership):
    """News only: each socket reads its grants from the database."""
    return person_group(membership.person_id), {"type": "ahp.grants_changed", "tenant_id": membership.tenant_id}


def do_create_tenant(slug, name=None):
    if Tenant.objects.filter(slug=slug).exists():
        raise Refused(TENANT_EXISTS.format(slug=slug), "exists")
    return do_save_tenant(Tenant(slug=slug, name=name or slug))


def do_save_tenant(tenant):
    """Create or edit a tenant (its slug, name, workspace root); no socket needs telling."""
    tenant.full_clean()
    tenant.save()
    return tenant


@transaction.atomic
def do_delete_tenant(tenant):
    """Delete a tenant with everything it holds (the database cascades)."""
    Tenant.objects.filter(pk=tenant.pk).delete()


@transaction.atomic
def do_add_member(tenant, username, role):
    """Make `username` (created if missing) a member of `tenant` with `role`; their open sockets
    there act with the role's grants from their next message."""
    if role not in BUILTIN_ROLES and not tenant.roles.filter(name=role).exists():
        raise Refused(NO_SUCH_ROLE.format(tenant=tenant.slug, role=role), "invalid")
    person, _ = get_user_model().objects.get_or_create(username=username)
    membership, _ = Membership.objects.update_or_create(tenant=tenant, person=person, defaults={"role": role})
    _tell_sockets_after_commit([_grants_changed(membership)])
    return membership


@transaction.atomic
def do_remove_member(tenant, person):
    """`person` leaves `tenant`: their tokens there stop working and their open sockets close."""
    removed, _ = Membership.objects.for_tenant(tenant).filter(person=person).delete()
    if not removed:
        raise Refused(NOT_A_MEMBER.format(person=person.username, tenant=tenant.slug), "not_found")
    _tell_sockets_after_commit([_access_ended(person_group(person.pk), tenant.pk)])


@transaction.atomic
def do_set_role(tenant, name, grants):
    """Define (or redefine) a tenant's role; everyone holding it acts with `grants` from their
    next message."""
    role, _ = Role.objects.update_or_create(tenant=tenant, name=name, defaults={"grants": list(grants)})
    _tell_sockets_after_commit([_grants_changed(m) for m in _holders(tenant, name)])
    return role


@transaction.atomic
def do_delete_role(tenant, name):
    """A deleted role falls back to the built-in role of the same name (or no grants)."""
    Role.objects.for_tenant(tenant).filter(name=name).delete()
    _tell_sockets_after_commit([_grants_changed(m) for m in _holders(tenant, name)])


def _holders(tenant, role_name):
    return list(Membership.objects.for_tenant(tenant).filter(role=role_name))


@transaction.atomic
def do_deactivate_person(person):
    """The person may no longer sign in anywhere: every token of theirs stops, their sockets close."""
    get_user_model().objects.filter(pk=person.pk).update(is_active=False)
    person.is_active = False
    _tell_sockets_after_commit([_access_ended(person_group(person.pk))])


@transaction.atomic
def do_save_person(person):
    """Create or edit a person (the user admin, runhost's first start); one saved inactive who
    was active is deactivated as do_deactivate_person would."""
    was_active = person.pk is not None and get_user_model().objects.filter(pk=person.pk, is_active=True).exists()
    person.save()
    if was_active and not person.is_active:
        _tell_sockets_after_commit([_access_ended(person_group(person.pk))])
    return person


@transaction.atomic
def do_delete_person(person):
    """A deleted person ends like a deactivated one: their sockets close."""
    do_deactivate_person(person)
    person.delete()


def do_mint_token(tenant, person=None, name=None, expires=None):
    """Answer (row, plaintext). A person's token needs the person to belong to the tenant."""
    if person is not None and not Membership.objects.filter(tenant=tenant, person=person).exists():
        raise Refused(NOT_A_MEMBER.format(person=person.username, tenant=tenant.slug), "invalid")
    if name and ApiToken.objects.filter(tenant=tenant, name=name).exists():
        raise Refused(TOKEN_NAME_TAKEN.format(tenant=tenant.slug, name=name), "exists")
    return ApiToken.mint(tenant, person=person, name=name, expires=expires)


PAGE_TOKEN_PREFIX = "console-page-"
PAGE_TOKEN_LIFETIME = timedelta(minutes=30)


@transaction.atomic
def do_mint_page_token(tenant, person=None):
    """A token for one console page the signed-in operator opened: acting as them (as the
    tenant's root for a superuser outside it) and ending by itself. Their expired page tokens go."""
    now = timezone.now()
    ApiToken.objects.for_tenant(tenant).filter(person=person, name__startswith=PAGE_TOKEN_PREFIX,
                                               expires__lte=now).delete()
    _, plaintext = do_mint_token(tenant, person=person, name=f"{PAGE_TOKEN_PREFIX}{secrets.token_hex(6)}",
                                 expires=now + PAGE_TOKEN_LIFETIME)
    return plaintext


@transaction.atomic
def do_revoke_token(tenant, name):
    """The token stops working at once: sockets opened with it close without waiting to speak."""
    token = ApiToken.objects.for_tenant(tenant).select_for_update().filter(name=name, revoked__isnull=True).first()
    if token is None:
        raise Refused(NO_LIVE_TOKEN.format(tenant=tenant.slug, name=name), "not_found")
    ApiToken.objects.filter(pk=token.pk).update(revoked=timezone.now())
    _tell_sockets_after_commit([_access_ended(token_group(token.pk))])


@transaction.atomic
def do_delete_token(token):
    """A deleted token ends like a revoked one."""
    token_id = token.pk
    ApiToken.objects.filter(pk=token_id).delete()
    _tell_sockets_after_commit([_access_ended(token_group(token_id))])
