from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from . import queries
from .algebra import holds

BUILTIN_ROLES = {
    "admin": ("*:*",),
    "member": ("session:read", "session:write", "terminal:read", "terminal:write"),
    "guest": ("session:read",),
}


def grants_of_role(role_name, defined):
    """A tenant-defined role (`defined`: its grants; None when the tenant defines none of that
    name) replaces the built-in role of the same name."""
    return tuple(defined) if defined is not None else BUILTIN_ROLES.get(role_name, ())


class Tenant(models.Model):
    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=200)
    created = models.DateTimeField(default=timezone.now)
    workspace_root = models.CharField(
        max_length=500, blank=True,
        help_text="The folder this tenant's working directories must lie in, inside the host's workspace root "
                  "(AHP_WORKSPACE_ROOT); empty means <host root>/<slug>. Only a superuser sets it.")

    def __str__(self):
        return self.slug

    def role_grants(self, role_name):
        role = self.roles.filter(name=role_name).first()
        return grants_of_role(role_name, role.grants if role is not None else None)


class TenantScopedQuerySet(models.QuerySet):
    """Every tenant-owned model is reached through `for_tenant`; `tenant_path` names the hop."""

    def for_tenant(self, tenant):
        return self.filter(**{self.model.tenant_path: tenant})


TenantScopedManager = models.Manager.from_queryset(TenantScopedQuerySet)


class Role(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="roles")
    name = models.SlugField()
    grants = models.JSONField(default=list, help_text='Grant strings, e.g. ["session:read", "chat:tool"].')

    tenant_path = "tenant"
    objects = TenantScopedManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="role_unique_per_tenant")]

    def __str__(self):
        return f"{self.tenant.slug}/{self.name}"


class Membership(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    person = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.SlugField(default="member")

    tenant_path = "tenant"
    objects = TenantScopedManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "person"], name="membership_unique")]

    def __str__(self):
        return f"{self.person} in {self.tenant} as {self.role}"


class ApiToken(models.Model):
    """A connection token. Only the sha256 of its secret is kept; the token is shown once."""

    PREFIX = "ahp"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="tokens")
    person = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="api_tokens",
        help_text="Empty for the tenant's root token, which holds every grant in its tenant.",
    )
    name = models.CharField(max_length=100)
    key_id = models.CharField(max_length=16, unique=True, editable=False)
    secret_sha256 = models.CharField(max_length=64, editable=False)
    created = models.DateTimeField(default=timezone.now)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)
    expires = models.DateTimeField(null=True, blank=True,
                                   help_text="When it stops working by itself; empty for never (the console's page tokens expire).")

    tenant_path = "tenant"
    objects = TenantScopedManager()
    _principal: Principal | None = None  # who acts with it, as `authenticate` read it

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="token_name_unique_per_tenant")]

    def __str__(self):
        return f"{self.tenant.slug}/{self.name}"

    @staticmethod
    def _digest(secret):
        return hashlib.sha256(secret.encode()).hexdigest()

    @classmethod
    def mint(cls, tenant, person=None, name=None, expires=None):
        """Create a token and answer (row, plaintext); the plaintext is never stored."""
        key_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        row = cls.objects.create(
            tenant=tenant, person=person, key_id=key_id, secret_sha256=cls._digest(secret),
            name=name or f"{person.username if person else 'root'}-{key_id[:6]}", expires=expires,
        )
        return row, f"{cls.PREFIX}_{key_id}_{secret}"

    @classmethod
    def parts(cls, plaintext):
        """(key id, secret) of a token's text, or None when it is not shaped like a token."""
        prefix, _, rest = (plaintext or "").partition("_")
        key_id, _, secret = rest.partition("_")
        return (key_id, secret) if prefix == cls.PREFIX and key_id and secret else None

    @classmethod
    def secret_matches(cls, secret_sha256, secret):
        return hmac.compare_digest(secret_sha256, cls._digest(secret))

    @classmethod
    def authenticate(cls, plaintext: str | None) -> ApiToken | None:
        """The live token row for `plaintext` (its tenant, person and principal with it), or None:
        one statement. The secret is compared in constant time."""
        parts = cls.parts(plaintext)
        if parts is None:
            return None
        key_id, secret = parts
        found = queries.token_with_access(key_id)
        if found is None:
            return None
        row, tenant, person, membership_id, role, defined = found
        if not cls.secret_matches(row.secret_sha256, secret):
            return None
        if row.expires is not None and row.expires <= timezone.now():
            return None
        if person is not None and not (person.is_active and membership_id is not None):
            return None
        row.tenant, row.person = tenant, person
        principal = Principal.root(tenant) if person is None else Principal(tenant, person, grants_of_role(role, defined))
        principal.token_id = row.pk
        row._principal = principal
        row.mark_used()
        return row

    @classmethod
    def live(cls):
        """Tokens that still work: not revoked nor expired, and a person's only while they are
        active and in the token's tenant."""
        return cls.objects.filter(revoked__isnull=True).filter(
            models.Q(expires__isnull=True) | models.Q(expires__gt=timezone.now())).filter(
            models.Q(person__isnull=True)
            | models.Q(person__is_active=True, person__memberships__tenant=models.F("tenant"))
        )

    def person_belongs(self):
        return Membership.objects.filter(tenant_id=self.tenant_id, person_id=self.person_id).exists()

    def mark_used(self, every=timedelta(minutes=1)):
        """Record use for operators, writing at most once a minute per token."""
        now = timezone.now()
        if self.last_used is None or self.last_used < now - every:
            ApiToken.objects.filter(pk=self.pk).update(last_used=now)
            self.last_used = now

    def principal(self):
        """Who acts with this token: as `authenticate` read it, else read now."""
        return self._principal or Principal.for_token(self)


class Principal:
    """Who is acting: a tenant's root, or a person of the tenant with their role's grants."""

    def __init__(self, tenant, person=None, grants=(), token_id=None):
        self.tenant = tenant
        self.person = person
        self.grants = tuple(grants)
        self.token_id = token_id  # the ApiToken acting, when one is

    @property
    def person_id(self):
        return self.person.pk if self.person is not None else None

    @classmethod
    def root(cls, tenant):
        return cls(tenant, None, ("*:*",))

    @classmethod
    def nobody(cls, tenant):
        """Behind a call nobody is behind (a turn the host began itself): the read half only."""
        return cls(tenant, None, ("session:read",))

    @classmethod
    def for_person(cls, tenant: Tenant, person: Any) -> Principal:
        """The person's role in the tenant and that role's grants, read in one statement (every
        host tool call reads them afresh, so a grant taken away holds from the next call)."""
        found = queries.role_with_grants(tenant.pk, person.pk)
        if found is None:
            return cls(tenant, person, ())
        role, defined = found
        return cls(tenant, person, grants_of_role(role, defined))

    @classmethod
    def for_token(cls, token):
        principal = cls.root(token.tenant) if token.person is None else cls.for_person(token.tenant, token.person)
        principal.token_id = token.pk
        return principal

    is_authenticated = True  # lets DRF's IsAuthenticated accept a principal as request.user

    @property
    def is_root(self):
        return self.person is None

    @property
    def name(self):
        if self.person is not None:
            return self.person.username
        # Without a person only a root token holds every grant; anything less is a turn nobody
        # is behind, and refusals name it so.
        return "root" if holds(self.grants, "*:*") else "this turn"

    def object_grants(self, obj):
        """Per-object grants (django-guardian) this person holds on `obj`."""
        if self.person is None or obj is None:
            return ()
        from guardian.shortcuts import get_perms

        return tuple(get_perms(self.person, obj))

    def may(self, needed, obj=None):
        return holds(self.grants, needed) or holds(self.object_grants(obj), needed)

    def __repr__(self):
        return f"<Principal {self.name}@{self.tenant.slug}>"

