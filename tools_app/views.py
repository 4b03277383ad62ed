from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from kernel.refusals import Refused

from .actions import do_delete_agent_definition, do_save_agent_definition
from .definitions.agent_definitions import AgentDefinitionInvalid
from .models import AgentDefinition, FullToolOutput

MAY_NOT_READ_AGENT_DEFINITIONS = "You need config:settings to read agent definitions."
READ_ONLY_KEYS = ("id", "modified", "invalid")  # what a client may echo back from a GET


def _forbidden(sentence):
    return Response({"error": sentence}, status=status.HTTP_403_FORBIDDEN)


def _refusal(refused: Refused) -> Response:
    return Response({"error": refused.sentence}, status=refused.answer.http_status)


def _save(request, definition, success_status):
    document = request.data
    if isinstance(document, dict):
        document = {key: value for key, value in document.items() if key not in READ_ONLY_KEYS}
    try:
        definition = do_save_agent_definition(request.auth.tenant, document, acting=request.auth, definition=definition)
    except Refused as refused:
        return _refusal(refused)
    except AgentDefinitionInvalid as error:
        body = {"error": str(error), "pointer": error.pointer, "message": error.message}
        return Response(body, status=status.HTTP_400_BAD_REQUEST)
    return Response(definition.to_dict(), status=success_status)


def _shown(definition):
    """A stored definition that no longer passes the gate is still shown, so it can be fixed."""
    try:
        definition.validated_document()
    except AgentDefinitionInvalid as error:
        return {**definition.to_dict(), "invalid": str(error)}
    return definition.to_dict()


@extend_schema_view(get=extend_schema(operation_id="agent_definitions_list"))
@extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)  # JSON documents, no serializer
class AgentDefinitionList(APIView):
    def get(self, request):
        if not request.auth.may("config:settings"):
            return _forbidden(MAY_NOT_READ_AGENT_DEFINITIONS)
        definitions = AgentDefinition.objects.for_tenant(request.auth.tenant).order_by("name")
        return Response({"items": [_shown(d) for d in definitions]})

    def post(self, request):
        return _save(request, None, status.HTTP_201_CREATED)


@extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)  # JSON documents, no serializer
class AgentDefinitionDetail(APIView):
    def _definition(self, request, definition_id):
        # Another tenant's definition answers exactly like one that does not exist.
        return get_object_or_404(AgentDefinition.objects.for_tenant(request.auth.tenant), id=definition_id)

    def get(self, request, definition_id):
        if not request.auth.may("config:settings"):
            return _forbidden(MAY_NOT_READ_AGENT_DEFINITIONS)
        return Response(_shown(self._definition(request, definition_id)))

    def put(self, request, definition_id):
        return _save(request, self._definition(request, definition_id), status.HTTP_200_OK)

    def delete(self, request, definition_id):
        try:
            do_delete_agent_definition(self._definition(request, definition_id), acting=request.auth)
        except Refused as refused:
            return _refusal(refused)
        return Response(status=status.HTTP_204_NO_CONTENT)


@extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)  # JSON documents, no serializer
class ToolOutputDetail(APIView):
    """The whole text of a tool result the model saw cut (`ahp-tool-output:/<id>` in its note),
    for whoever may read the session it belongs to."""

    def get(self, request, call_id):
        from django.http import HttpResponse

        from sessions_app.models import Session

        output = get_object_or_404(
            FullToolOutput.objects.filter(call__turn__chat__session__in=Session.objects.visible_to(request.auth)),
            call_id=call_id,
        )
        return HttpResponse(output.text, content_type="text/plain; charset=utf-8")
