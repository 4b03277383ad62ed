"""The door for sessionless calls: `POST /api/v1/tools/<name>` with a bearer token and the
tool's arguments as the JSON body. No session calls, so nothing is charged to a tree and what
it makes is the caller's, with no parent."""
from jsonschema import Draft202012Validator
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from grants.algebra import holds
from grants.models import Membership
from kernel.refusals import Refused

from ...catalog.bounding import result_text
from ...catalog.catalog import Caller, sessionless_tools
from ...catalog.host_tools import REGISTRY
from ...catalog.validation import input_problem
from ...runtime import ToolCallContext, as_result

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
    error = next(iter(sorted(Draft202012Validator(schema).iter_errors(arguments), key=lambda e: e.path)), None)
    if error is None:
        return None
    pointer = "/" + "/".join(str(p) for p in error.absolute_path)
    return f"Invalid input for {tool.effective_name} at {pointer}: {error.message}"


def refused(sentence, code):
    return Response({"error": sentence}, status=code)


class SessionlessToolCall(APIView):
    def post(self, request, name):
        principal = request.auth
        tool = next((t for t in REGISTRY.tools if t.effective_name == name and t.sessionless), None)
        if tool is None:
            return refused(f'No tool named "{name}" may be called without a session.', status.HTTP_404_NOT_FOUND)
        if not any(b.tool is tool for b in sessionless_tools((tool,), caller_of(principal))):
            return refused(f"{principal.name} may not {tool.grant} here", status.HTTP_403_FORBIDDEN)
        arguments = request.data if request.body else {}
        error = input_error(tool, arguments)
        if error:
            return refused(error, status.HTTP_400_BAD_REQUEST)
        try:
            value = tool.executor(ToolCallContext(principal, None, None, None, ""), arguments)
        except Refused as refusal:
            return refused(refusal.sentence, REFUSAL_STATUS.get(refusal.kind, 400))
        result = as_result(name, value)
        return Response({"result": result, "text": result_text(result)})
