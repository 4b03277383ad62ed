from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from grants.models import ApiToken, Membership, Tenant


def run(*args):
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_createtenant_creates_a_tenant(db):
    run("createtenant", "initech", "--name", "Initech")
    assert Tenant.objects.get(slug="initech").name == "Initech"


def test_createtenant_refuses_a_duplicate(db):
    run("createtenant", "initech")
    with pytest.raises(CommandError, match="Tenant initech already exists."):
        run("createtenant", "initech")


def test_addmember_creates_the_person_if_missing(db):
    run("createtenant", "initech")
    run("addmember", "initech", "milton", "--role", "guest")
    assert Membership.objects.get(person__username="milton").role == "guest"


def test_addmember_with_admin_login_lets_a_tenant_admin_sign_in_to_the_admin(db, client):
    run("createtenant", "initech")
    printed = run("addmember", "initech", "bill", "--role", "admin", "--admin-login")
    password = printed.rsplit(" ", 1)[1].strip()
    assert printed.startswith("bill is admin in initech\nbill signs in at /admin/ with password ")
    assert client.login(username="bill", password=password)
    assert client.get("/admin/grants/membership/").status_code == 200


def test_addmember_refuses_an_unknown_role(db):
    run("createtenant", "initech")
    with pytest.raises(CommandError, match="Tenant initech has no role boss."):
        run("addmember", "initech", "milton", "--role", "boss")


def test_minttoken_prints_only_a_working_token(db):
    run("createtenant", "initech")
    run("addmember", "initech", "milton", "--role", "member")
    printed = run("minttoken", "initech", "milton")
    token = printed.strip()
    assert printed == token + "\n"
    assert ApiToken.authenticate(token).person.username == "milton"


def test_minttoken_root_prints_a_root_token(db):
    run("createtenant", "initech")
    token = run("minttoken", "initech", "--root").strip()
    assert ApiToken.authenticate(token).principal().is_root


def test_minttoken_refuses_a_person_outside_the_tenant(db):
    run("createtenant", "initech")
    run("createtenant", "initrode")
    run("addmember", "initrode", "bob", "--role", "member")
    with pytest.raises(CommandError, match="bob is not a member of initech."):
        run("minttoken", "initech", "bob")


def test_minttoken_refuses_a_name_the_tenant_already_uses(db):
    run("createtenant", "initech")
    run("minttoken", "initech", "--root", "--name", "ci")
    with pytest.raises(CommandError, match="Tenant initech already has a token named ci."):
        run("minttoken", "initech", "--root", "--name", "ci")


def test_revoketoken_revokes_by_name(db):
    run("createtenant", "initech")
    token = run("minttoken", "initech", "--root", "--name", "ci").strip()
    run("revoketoken", "initech", "ci")
    assert ApiToken.authenticate(token) is None
    with pytest.raises(CommandError, match="Tenant initech has no live token named ci."):
        run("revoketoken", "initech", "ci")


def test_removemember_ends_the_persons_tokens_in_the_tenant(db):
    run("createtenant", "initech")
    run("addmember", "initech", "milton", "--role", "member")
    token = run("minttoken", "initech", "milton").strip()
    assert run("removemember", "initech", "milton") == "milton is no longer in initech\n"
    assert ApiToken.authenticate(token) is None
    with pytest.raises(CommandError, match="milton is not a member of initech."):
        run("removemember", "initech", "milton")


def test_deactivateperson_ends_every_token_of_theirs(db):
    run("createtenant", "initech")
    run("addmember", "initech", "milton", "--role", "member")
    token = run("minttoken", "initech", "milton").strip()
    assert run("deactivateperson", "milton") == "Deactivated milton\n"
    assert ApiToken.authenticate(token) is None
    with pytest.raises(CommandError, match="No person bob."):
        run("deactivateperson", "bob")
