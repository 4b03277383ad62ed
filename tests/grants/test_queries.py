"""Each hand-written statement of grants/queries.py reads what its ORM twin reads, on whichever
database the suite runs on (SQLite, or PostgreSQL with DATABASE_URL)."""
from grants.actions import do_remove_member, do_revoke_token, do_set_role
from grants.models import ApiToken, Membership, Role
from grants.queries import TokenAccess, role_with_grants, token_with_access


def values(instance):
    """Every column of a model instance as Python values, or None for no instance."""
    if instance is None:
        return None
    return {field.attname: getattr(instance, field.attname) for field in instance._meta.concrete_fields}


def orm_token_with_access(key_id):
    token = ApiToken.objects.select_related("tenant", "person").filter(key_id=key_id, revoked__isnull=True).first()
    if token is None:
        return None
    membership = Membership.objects.filter(tenant_id=token.tenant_id, person_id=token.person_id).first()
    role = membership.role if membership else None
    defined = Role.objects.filter(tenant_id=token.tenant_id, name=role).values_list("grants", flat=True).first()
    return TokenAccess(token, token.tenant, token.person, membership and membership.id, role, defined)


def orm_role_with_grants(tenant_id, person_id):
    membership = Membership.objects.filter(tenant_id=tenant_id, person_id=person_id).first()
    if membership is None:
        return None
    return membership.role, Role.objects.filter(tenant_id=tenant_id, name=membership.role).values_list(
        "grants", flat=True).first()


def as_compared(access):
    if access is None:
        return None
    return (values(access.token), values(access.tenant), values(access.person), *access[3:])


def test_a_tokens_read_matches_its_orm_twin_for_every_kind_of_token(acme, globex):
    do_set_role(acme.tenant, "member", ["session:read", "chat:tool"])  # a role the tenant defines
    do_remove_member(acme.tenant, acme.guest)  # a token whose person left the tenant
    do_revoke_token(acme.tenant, "acme-admin")
    for plaintext in [*acme.tokens.values(), *globex.tokens.values(), "ahp_nosuchkey_x"]:
        key_id, _ = ApiToken.parts(plaintext)
        assert as_compared(token_with_access(key_id)) == as_compared(orm_token_with_access(key_id)), plaintext
    member = token_with_access(ApiToken.parts(acme.tokens["member"])[0])
    assert (member.role, member.defined) == ("member", ["session:read", "chat:tool"])
    assert token_with_access(ApiToken.parts(acme.tokens["admin"])[0]) is None  # revoked


def test_a_persons_role_and_grants_match_their_orm_twin(acme, globex):
    do_set_role(acme.tenant, "guest", ["session:read", "terminal:read"])
    for tenant in (acme.tenant, globex.tenant):
        for person in (acme.admin, acme.member, acme.guest, globex.member):
            assert role_with_grants(tenant.pk, person.pk) == orm_role_with_grants(tenant.pk, person.pk)
    assert role_with_grants(acme.tenant.pk, acme.guest.pk) == ("guest", ["session:read", "terminal:read"])
    assert role_with_grants(acme.tenant.pk, globex.member.pk) is None
