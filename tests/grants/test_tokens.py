import hashlib
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from grants.actions import do_mint_token, do_remove_member, do_revoke_token, do_set_role
from grants.models import ApiToken


def test_it_stores_only_the_sha256_of_the_secret(acme):
    row, plaintext = do_mint_token(acme.tenant, person=acme.member, name="laptop")
    secret = plaintext.split("_", 2)[2]
    row.refresh_from_db()
    assert row.secret_sha256 == hashlib.sha256(secret.encode()).hexdigest()
    stored = [str(v) for v in ApiToken.objects.filter(pk=row.pk).values().get().values()]
    assert not any(secret in value for value in stored)


def test_it_authenticates_the_token_as_its_person(acme):
    row, plaintext = do_mint_token(acme.tenant, person=acme.member, name="laptop")
    assert ApiToken.authenticate(plaintext) == row
    principal = ApiToken.authenticate(plaintext).principal()
    assert principal.person == acme.member
    assert principal.may("session:write") and not principal.may("config:change")


def test_a_root_token_holds_every_grant_of_its_tenant(acme):
    principal = ApiToken.authenticate(acme.tokens["root"]).principal()
    assert principal.is_root and principal.tenant == acme.tenant
    assert principal.may("config:change") and principal.may("session:*")


def test_it_refuses_a_token_with_a_wrong_secret(acme):
    _, plaintext = do_mint_token(acme.tenant, person=acme.member, name="laptop")
    assert ApiToken.authenticate(plaintext[:-2] + "xx") is None
    assert ApiToken.authenticate("not-a-token") is None
    assert ApiToken.authenticate("") is None


def test_a_revoked_token_no_longer_authenticates(acme):
    _, plaintext = do_mint_token(acme.tenant, person=acme.member, name="laptop")
    do_revoke_token(acme.tenant, "laptop")
    assert ApiToken.authenticate(plaintext) is None


def test_a_deactivated_persons_token_no_longer_authenticates(acme):
    acme.member.is_active = False
    acme.member.save()
    assert ApiToken.authenticate(acme.tokens["member"]) is None


def test_a_tenant_defined_role_replaces_the_built_in_of_the_same_name(acme):
    acme.tenant.roles.create(name="guest", grants=["session:read", "chat:tool"])
    assert ApiToken.authenticate(acme.tokens["guest"]).principal().may("chat:tool")


def test_using_a_token_records_when_it_was_last_used(acme):
    row, plaintext = do_mint_token(acme.tenant, person=acme.member, name="laptop")
    assert row.last_used is None
    ApiToken.authenticate(plaintext)
    row.refresh_from_db()
    assert row.last_used is not None


def test_a_person_removed_from_the_tenant_no_longer_authenticates(acme):
    do_remove_member(acme.tenant, acme.member)
    assert ApiToken.authenticate(acme.tokens["member"]) is None


def test_an_expired_token_no_longer_authenticates_and_one_still_valid_does(acme):
    _, lapsed = do_mint_token(acme.tenant, person=acme.member, name="lapsed", expires=timezone.now())
    ends = timezone.now() + timedelta(hours=1)
    _, valid = do_mint_token(acme.tenant, person=acme.member, name="valid", expires=ends)
    assert ApiToken.authenticate(lapsed) is None
    assert ApiToken.authenticate(valid).expires == ends


def test_a_token_its_person_and_its_role_are_read_in_one_statement(acme):
    do_set_role(acme.tenant, "guest", ["session:read", "chat:tool"])
    ApiToken.authenticate(acme.tokens["guest"])  # records its use, at most once a minute
    with CaptureQueriesContext(connection) as statements:
        token = ApiToken.authenticate(acme.tokens["guest"])
        principal = token.principal()
        assert (token.tenant, token.person, principal.person) == (acme.tenant, acme.guest, acme.guest)
        assert principal.may("chat:tool") and not principal.may("session:write")
    assert len(statements) == 1
