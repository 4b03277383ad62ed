from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework.response import Response
from rest_framework.views import APIView

from .models import Session


@extend_schema_view(get=extend_schema(operation_id="sessions_list"))
@extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)  # JSON documents, no serializer
class SessionList(APIView):
    """The sessions the caller may read, most recently modified first."""

    def get(self, request):
        sessions = Session.objects.visible_to(request.auth).order_by("-modified")[:200]
        return Response({"items": [s.summary() for s in sessions]})


@extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)  # JSON documents, no serializer
class SessionDetail(APIView):
    def get(self, request, session_id):
        # Another tenant's session answers exactly like one that does not exist.
        session = get_object_or_404(Session.objects.visible_to(request.auth), id=session_id)
        return Response(session.summary())
