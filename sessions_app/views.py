from django.shortcuts import get_object_or_404
from rest_framework.response import Response
from rest_framework.views import APIView

from .models import Session


class SessionList(APIView):
    """The sessions the caller may read, most recently modified first."""

    def get(self, request):
        sessions = Session.objects.visible_to(request.auth).order_by("-modified")[:200]
        return Response({"items": [s.summary() for s in sessions]})


class SessionDetail(APIView):
    def get(self, request, session_id):
        # Another tenant's session answers exactly like one that does not exist.
        session = get_object_or_404(Session.objects.visible_to(request.auth), id=session_id)
        return Response(session.summary())
