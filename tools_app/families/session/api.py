"""The door for sessionless calls: `POST /api/v1/tools/<name>` with a bearer token and the
tool's arguments as the JSON body. No session calls, so nothing is charged to a tree and what
it makes is the caller's, with no parent."""
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from grants.algebra import holds
from grants.models import Membership
from kernel.refusals import Refused
from sessions_app.actions.tool_calls import do_record_sessionless_call, failure

from ...catalog.bounding import result_text
from ...catalog.catalog import Caller, sessionless_tools
from ...catalog.host_tools import REGISTRY
from ...catalog.validation import input_problem, input_validator
from ...runtime.context import ToolCallContext, as_result

REFUSAL_STATUS = {"permission": 403, "not_found": 404, "conflict": 409, "exists": 409, "invalid": 400,
                  "no_agent": 400}


def caller_of(principal):
    return Caller(grants=principal.grants, is_root=principal.person is None and holds(principal.grants, "*:*"),
                  has_users_directory=Membership.objects.filter(tenant=principal.tenant).exists())


def input_error(tool, arguments):
    schema = tool.wire_definition(tool.for_session(None) if tool.for_session else None)["inputSchema"]
    if not isinstance(arguments, dict):
        return f"Invalid input for {tool.effective_name} at /: expected an object."
    problem = input_problem(tool.effective_name, arguments)
    if problem:
        return problem
    error = next(iter(sorted(input_validator(schema).iter_errors(arguments), key=lambda e: e.path)), None)
    if error is None:
        return None
    pointer = "/" + "/".join(str(p) for p in error.absolute_path)
    return f"Invalid input for {tool.effective_name} at {pointer}: {error.message}"


def refused(sentence, code):
    return Response({"error": sentence}, status=code)


def not_enabled(name):
    return f"{name} is not enabled without a session: its isEnabledForSession check said no."


@extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)  # JSON documents, no serializer
class SessionlessToolCall(APIView):
    def post(self, request, name):
        """Every call, ran or refused, is audited as a tool call naming the caller and no session."""
        principal, started = request.auth, timezone.now()
        arguments = request.data if request.body else {}
        tool = next((t for t in REGISTRY.tools if t.effective_name == name and t.sessionless), None)
        answer, result = self.answer(principal, tool, name, arguments)
        if result is None:
            result = failure(name, answer.data["error"])
        do_record_sessionless_call(principal, name, arguments, result, tool.source if tool else "", started)
        return answer

    def answer(self, principal, tool, name, arguments):
        """(the response, the call's result or None when refused)."""
        if tool is None:
            return refused(f'No tool named "{name}" may be called without a session.', status.HTTP_404_NOT_FOUND), None
        if not any(b.tool is tool for b in sessionless_tools((tool,), caller_of(principal))):
            return refused(f"{principal.name} may not {tool.grant} here", status.HTTP_403_FORBIDDEN), None
        if tool.is_enabled_for_session is not None and not tool.is_enabled_for_session(None):
            return refused(not_enabled(name), status.HTTP_403_FORBIDDEN), None
        error = input_error(tool, arguments)
        if error:
            return refused(error, status.HTTP_400_BAD_REQUEST), None
        try:
            value = tool.executor(ToolCallContext(principal, None, None, None, ""), arguments)
        except Refused as refusal:
            return refused(refusal.sentence, REFUSAL_STATUS.get(refusal.kind, 400)), None
        result = as_result(name, value)
        return Response({"result": result, "text": result_text(result)}), result
