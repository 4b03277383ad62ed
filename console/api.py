"""REST: the tenant's HostConfig under its wire keys. Reading needs config:settings, writing
config:change; writes go through do_change_host_config, so they apply live like any other."""
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from kernel.refusals import Refused
from sessions_app.actions import require
from tools_app.actions import do_change_host_config
from tools_app.config import KEYS, HostConfig, wire_values

# How REST reads and writes each kind of value; help texts come from the key.
SERIALIZER_FIELDS = {
    "boolean": lambda key: serializers.BooleanField(help_text=key.description),
    "providers": lambda key: serializers.ListField(child=serializers.CharField(), help_text=key.description),
    "servers": lambda key: serializers.JSONField(allow_null=True, help_text=key.description),
    "connections": lambda key: serializers.JSONField(allow_null=True, help_text=key.description),
    "milliseconds": lambda key: serializers.IntegerField(min_value=0, help_text=key.description),
    "choice": lambda key: serializers.ChoiceField(choices=list(key.choices), help_text=key.description),
}
_CONFIG_FIELDS = {key.wire: SERIALIZER_FIELDS[key.kind](key) for key in KEYS}
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
