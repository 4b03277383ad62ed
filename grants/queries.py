"""The grants app's hand-written SQL, for the two reads on every door's hot path, where the ORM
spends far longer composing a statement than the database answers it: a token's authentication
(every socket and REST request) and a person's grants (every host tool call). Each has an ORM
twin in tests/grants/test_queries.py that must read the same, on both databases."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from django.contrib.auth import get_user_model
from django.db import connection

from kernel.rows import Columns, fetch_one, table, value_reader

from . import models

# (role name, the grants of the tenant's role of that name or None when it defines none)
RoleGrants = tuple[str, list[str] | None]


class TokenAccess(NamedTuple):
    """A token as its authentication reads it, with what its principal is made of."""

    token: models.ApiToken
    tenant: models.Tenant
    person: Any  # the person model's row, or None for a root token
    membership_id: int | None  # the person's membership of the token's tenant
    role: str | None
    defined: list[str] | None  # the grants the tenant defines for that role; None when it defines none


def token_with_access(key_id: str) -> TokenAccess | None:
    """The unrevoked token `key_id` names, with its access: one statement, or None when there is
    no such token."""
    columns, sql, read_grants = _token_reading()
    found = fetch_one(columns, sql, [key_id])
    if found is None:
        return None
    (token, tenant, person), (membership_id, role, grants) = found
    return TokenAccess(token, tenant, person, membership_id, role, None if grants is None else read_grants(grants))


def role_with_grants(tenant_id: int, person_id: int) -> RoleGrants | None:
    """The person's role in the tenant and the grants the tenant defines for it: one statement,
    or None when the person is not a member."""
    sql, read_grants = _membership_reading()
    with connection.cursor() as cursor:
        cursor.execute(sql, [tenant_id, person_id])
        found = cursor.fetchone()
    if found is None:
        return None
    role, grants = found
    return role, None if grants is None else read_grants(grants)


@functools.cache
def _membership_reading() -> tuple[str, Callable[[Any], Any]]:
    Membership, Role = models.Membership, models.Role
    sql = (f"SELECT m.role, r.grants FROM {table(Membership)} m "
           f"LEFT JOIN {table(Role)} r ON r.tenant_id = m.tenant_id AND r.name = m.role "
           "WHERE m.tenant_id = %s AND m.person_id = %s")
    return sql, value_reader(Role._meta.get_field("grants"), "r")


@functools.cache
def _token_reading() -> tuple[tuple[Columns, ...], str, Callable[[Any], Any]]:
    ApiToken, Membership, Role, Tenant = models.ApiToken, models.Membership, models.Role, models.Tenant
    person_model = get_user_model()
    columns = (Columns(ApiToken, "t"), Columns(Tenant, "n"), Columns(person_model, "u"))
    sql = (f"SELECT {', '.join(c.sql for c in columns)}, m.id, m.role, r.grants "
           f"FROM {table(ApiToken)} t JOIN {table(Tenant)} n ON n.id = t.tenant_id "
           f"LEFT JOIN {table(person_model)} u ON u.id = t.person_id "
           f"LEFT JOIN {table(Membership)} m ON m.tenant_id = t.tenant_id AND m.person_id = t.person_id "
           f"LEFT JOIN {table(Role)} r ON r.tenant_id = t.tenant_id AND r.name = m.role "
           "WHERE t.key_id = %s AND t.revoked IS NULL")
    return columns, sql, value_reader(Role._meta.get_field("grants"), "r")
