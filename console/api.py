"""REST: the tenant's HostConfig under its wire keys (reading needs config:settings, writing
config:change; writes go through do_change_host_config, so they apply live like any other, and
answer the admin's warnings about endpoints the outbound rules refuse), and the catalog explainer
of a session's chat for whoever may read that session."""
from typing import Callable

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from grants.authentication import acting_principal
from kernel.ids import parse_uuid
from kernel.refusals import Refused
from sessions_app.actions import require
from sessions_app.models import Session
from tools_app.actions import do_change_host_config
from tools_app.config import KEYS, HostConfig, Key, wire_values
from tools_app.destinations import unreachable_endpoints

from .explainer import explain_chat

# How REST reads and writes each kind of value; help texts come from the key.
SERIALIZER_FIELDS: dict[str, Callable[[Key], serializers.Field]] = {
    "boolean": lambda key: serializers.BooleanField(help_text=key.description),
    "providers": lambda key: serializers.ListField(child=serializers.CharField(), help_text=key.description),
    "servers": lambda key: serializers.JSONField(allow_null=True, help_text=key.description),
    "connections": lambda key: serializers.JSONField(allow_null=True, help_text=key.description),
    "plugins": lambda key: serializers.JSONField(allow_null=True, help_text=key.description),
    "milliseconds": lambda key: serializers.IntegerField(min_value=0, help_text=key.description),
    "choice": lambda key: serializers.ChoiceField(choices=list(key.choices), help_text=key.description),
}
_CONFIG_FIELDS: dict[str, serializers.Field] = {key.wire: SERIALIZER_FIELDS[key.kind](key) for key in KEYS}
HostConfigDocument = inline_serializer("HostConfig", fields=_CONFIG_FIELDS)
HostConfigChanges = inline_serializer("HostConfigChanges", fields=_CONFIG_FIELDS, partial=True)
HostConfigSaved = inline_serializer("HostConfigSaved", fields={**_CONFIG_FIELDS, "warnings": serializers.ListField(
    child=serializers.CharField(), help_text="A sentence per endpoint sessions cannot reach as saved (a private "
    "address not on the outbound allow-list), as the admin shows them; not a key, never sent back.")})
Refusal = inline_serializer("Refusal", fields={"error": serializers.CharField()})


def refusal_response(refused: Refused) -> Response:
    return Response({"error": refused.sentence}, status=refused.answer.http_status)


class HostConfigView(APIView):
    """The calling token's tenant's host configuration; no other tenant's is reachable."""

    @extend_schema(responses={200: HostConfigDocument, 403: Refusal})
    def get(self, request: Request) -> HttpResponse:
        principal = acting_principal(request)
        try:
            require(principal, "config:settings")
        except Refused as refused:
            return refusal_response(refused)
        return Response(wire_values(HostConfig.for_tenant(principal.tenant)))

    def _change(self, request: Request, replace: bool) -> HttpResponse:
        """The saved configuration, with the same warnings the admin flashes on its save."""
        try:
            config = do_change_host_config(request.auth, request.data, replace=replace)
        except Refused as refused:
            return refusal_response(refused)
        return Response({**wire_values(config), "warnings": unreachable_endpoints(config)})

    @extend_schema(request=HostConfigChanges, responses={200: HostConfigSaved, 400: Refusal, 403: Refusal},
                   description="Set the keys given; the others keep their values. An unknown key is refused.")
    def patch(self, request: Request) -> HttpResponse:
        return self._change(request, replace=False)

    @extend_schema(request=HostConfigChanges, responses={200: HostConfigSaved, 400: Refusal, 403: Refusal},
                   description="Set the keys given; every other key returns to its default.")
    def put(self, request: Request) -> HttpResponse:
        return self._change(request, replace=True)


NOT_A_CHAT_ID = "chat must be the id (a UUID) of one of this session's chats."
CatalogExplained = inline_serializer("CatalogExplained", fields={
    "chat": serializers.UUIDField(),
    "tools": serializers.ListField(child=inline_serializer("ExplainedTool", fields={
        "name": serializers.CharField(), "source": serializers.CharField(), "offered": serializers.BooleanField(),
        "deferred": serializers.BooleanField(required=False),
        "reason": serializers.CharField(required=False, help_text="Why it is hidden, as a sentence.")})),
    "instructions": serializers.ListField(child=serializers.CharField()),
})


class SessionCatalogView(APIView):
    """Every tool of every source for one of the session's chats (its default chat unless
    `chat` names another): offered, or hidden with the rule that hid it."""

    @extend_schema(parameters=[OpenApiParameter("chat", str, description="A chat of the session; default: its main chat.")],
                   responses={200: CatalogExplained, 400: Refusal, 404: Refusal})
    def get(self, request, session_id):
        # Another tenant's session, or one the caller may not read, answers like one that does not exist.
        session = get_object_or_404(Session.objects.visible_to(request.auth), id=session_id)
        chats = session.chats.all()
        if "chat" in request.query_params:
            chat_id = parse_uuid(request.query_params["chat"])
            chat = chats.filter(id=chat_id).first() if chat_id else None
            if chat is None:
                return Response({"error": NOT_A_CHAT_ID}, status=400 if chat_id is None else 404)
        else:
            chat = chats.get(is_default=True)
        return Response({"chat": str(chat.id), **explain_chat(chat)})
