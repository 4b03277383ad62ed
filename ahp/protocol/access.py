"""Who an AHP connection acts as, and for how long: the token on the upgrade, the grants it acts
with, and the socket's end when access ends.

Revoking the token, deactivating the person or removing their membership closes the socket at
once (4401), told through the token's and the person's groups (and re-read at the next message
when it happened in this process, or in another process of the embedded host: grants.liveness);
a changed role has it read its grants again the same way.
"""
from datetime import datetime
from typing import Any
from urllib.parse import parse_qs

from channels.generic.websocket import AsyncWebsocketConsumer
from django.db import InterfaceError, OperationalError

from grants import liveness
from grants.actions import token_group
from grants.authentication import token_from_headers
from grants.models import ApiToken, Principal, Tenant
from kernel.orm import database_sync_to_async

from . import subscriptions

TOKEN_REVOKED_CLOSE = 4401  # as a handshake without a live token
Grants = tuple[str, ...]


def token_from_scope(scope: dict[str, Any]) -> str | None:
    """The token on the upgrade: `?tkn=` in the query string or `Authorization: Bearer`."""
    query = parse_qs(scope.get("query_string", b"").decode())
    if query.get("tkn"):
        return query["tkn"][0]
    headers = dict(scope.get("headers", []))
    return token_from_headers(headers.get(b"authorization", b"").decode())


def authenticated(offered: str | None) -> tuple[ApiToken, Principal] | tuple[None, None]:
    """(token, principal) for the offered token, or (None, None): one database hop per handshake."""
    token = ApiToken.authenticate(offered)
    return (token, token.principal()) if token is not None else (None, None)


class AccessConsumer(AsyncWebsocketConsumer):
    """A socket acting with a token's access: the AHP consumer sets these when it connects."""

    principal: Principal
    tenant: Tenant
    token_id: int
    token_expires: datetime | None
    access_groups: list[str]
    liveness_read: Any  # grants.liveness.current() when this socket last read its access
    revoked: bool  # closing: frames still on their way are not read

    def grants_now(self) -> Grants | None:
        """The grants this socket's token acts with now, or None when it no longer works."""
        try:
            if not ApiToken.live().filter(pk=self.token_id).exists():
                return None
            if self.principal.person is None:
                return self.principal.grants  # a root token's never change
            return Principal.for_person(self.tenant, self.principal.person).grants
        except (OperationalError, InterfaceError):
            # The database is away: whatever the message needs of it fails with DATABASE_UNAVAILABLE.
            return self.principal.grants

    async def reread_access(self) -> bool:
        """Access may have changed (grants.liveness): a token that no longer works closes the
        socket; otherwise it acts with the grants as they are now. Answers whether it is open."""
        reading = liveness.current()
        grants = await database_sync_to_async(self.grants_now)()
        if grants is None:
            await self.close_revoked()
            return False
        self.liveness_read = reading
        if grants != self.principal.grants:
            await self.act_with(grants)
        return True

    async def act_with(self, grants: Grants) -> None:
        self.principal = Principal(self.tenant, self.principal.person, grants, self.token_id)
        await subscriptions.drop_unreadable(self)

    async def adopt_token(self, token: ApiToken) -> None:
        """`authenticate`: the connection now lives and dies with `token` (same person)."""
        old_group, self.token_id = token_group(self.token_id), token.pk
        await self.channel_layer.group_add(token_group(token.pk), self.channel_name)
        self.access_groups = [token_group(token.pk), *(g for g in self.access_groups if g != old_group)]
        await self.channel_layer.group_discard(old_group, self.channel_name)

    async def ahp_access_ended(self, message: dict[str, Any]) -> None:
        """The token was revoked, or the person deactivated or removed from this tenant."""
        if message.get("tenant_id") in (None, self.tenant.pk):
            await self.close_revoked()

    async def ahp_grants_changed(self, message: dict[str, Any]) -> None:
        """The person's role (or its grants) changed: the next message acts with the new grants,
        and channels they may no longer read are left at once. The grants are read from the
        database, never taken from the message: the layer carries only the news."""
        if message.get("tenant_id") == self.tenant.pk:
            await self.reread_access()

    async def close_after_answer(self, code: int, reason: str) -> None:
        """End the connection once an answer that ends it was sent (-32005); frames already on
        their way are not read."""
        if self.revoked:
            return
        self.revoked = True
        await self.close(code=code, reason=reason)

    async def close_revoked(self) -> None:
        if self.revoked:
            return  # closing already: a second close on a closed socket would fail
        self.revoked = True
        await self.close(code=TOKEN_REVOKED_CLOSE, reason="The connection's token was revoked.")
