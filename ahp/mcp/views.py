from typing import cast
from uuid import UUID

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from grants.models import ApiToken, Principal
from kernel.refusals import Refused
from sessions_app.actions import do_open_tools_endpoint
from sessions_app.models import Session


@extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)  # JSON documents, no serializer
class ToolsEndpointView(APIView):
    """The session's MCP tools endpoint and a token of the caller's own, acting as them."""

    def get(self, request: Request, session_id: UUID) -> Response:
        # Another tenant's session answers exactly like one that does not exist.
        principal = cast(Principal, request.auth)  # grants.authentication's
        session = get_object_or_404(Session.objects.visible_to(principal), id=session_id)
        try:
            endpoint = do_open_tools_endpoint(principal, session, ApiToken.objects.get(pk=principal.token_id))
        except Refused as refusal:
            raise PermissionDenied(refusal.sentence) from None
        return Response({"url": request.build_absolute_uri(endpoint.path), "token": endpoint.token})
