"""REST: the tenant's HostConfig under its wire keys. Reading needs config:settings, writing
config:change; writes go through do_change_host_config, so they apply live like any other."""
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from kernel.refusals import Refused
from sessions_app.actions import require
from tools_app.actions import do_change_host_config
from tools_app.host_config import wire_values
from tools_app.models import HostConfig

_CONFIG_FIELDS = {
    "sessionTools": serializers.BooleanField(help_text="Offer the session tools at all."),
    "sessionToolsProviders": serializers.ListField(
        child=serializers.CharField(), help_text="Provider ids that get the session tools; empty means every one."),
    "advancedTools": serializers.BooleanField(help_text="Offer tools that need advanced permission."),
    "mcpServers": serializers.JSONField(
        allow_null=True, help_text='MCP servers by name; credentials read "<set>" and are kept when sent back so.'),
    "clientToolTimeoutMs": serializers.IntegerField(min_value=0, help_text="0 waits for ever. Default 600000."),
    "clientToolCallDisconnectTimeoutMs": serializers.IntegerField(min_value=0, help_text="Default 30000."),
    "agentOrchestrationLimits": serializers.ChoiceField(choices=["on", "off"]),
    "agentOrchestrationLimitsScope": serializers.ChoiceField(choices=["tree", "session"]),
    "chatMoves.enabled": serializers.BooleanField(),
}
HostConfigDocument = inline_serializer("HostConfig", fields=_CONFIG_FIELDS)
HostConfigChanges = inline_serializer("HostConfigChanges", fields=_CONFIG_FIELDS, partial=True)
Refusal = inline_serializer("Refusal", fields={"error": serializers.CharField()})

def refusal_response(refused):
    return Response({"error": refused.sentence}, status=refused.answer.http_status)


class HostConfigView(APIView):
    """The calling token's tenant's host configuration; no other tenant's is reachable."""

    @extend_schema(responses={200: HostConfigDocument, 403: Refusal})
    def get(self, request):
        try:
            require(request.auth, "config:settings")
        except Refused as refused:
            return refusal_response(refused)
        return Response(wire_values(HostConfig.for_tenant(request.auth.tenant)))

    def _change(self, request, replace):
        try:
            config = do_change_host_config(request.auth, request.data, replace=replace)
        except Refused as refused:
            return refusal_response(refused)
        return Response(wire_values(config))

    @extend_schema(request=HostConfigChanges, responses={200: HostConfigDocument, 400: Refusal, 403: Refusal},
                   description="Set the keys given; the others keep their values. An unknown key is refused.")
    def patch(self, request):
        return self._change(request, replace=False)

    @extend_schema(request=HostConfigChanges, responses={200: HostConfigDocument, 400: Refusal, 403: Refusal},
                   description="Set the keys given; every other key returns to its default.")
    def put(self, request):
        return self._change(request, replace=True)
