"""`ahp_resource`: read what a URI names, the host's own channels and tool outputs, or a
resource a connected client publishes, which the host asks that client for (client_requests.py)."""
import json

from channels.db import database_sync_to_async

from kernel.refusals import Refused
from sessions_app import state
from sessions_app.channels import parse
from sessions_app.models import ActiveClient, Chat, Session, ToolCall
from tools_app.catalog.registry import Tool
from tools_app.client_requests import ask_client

from .comments.models import Annotation
from .session.listing import session_config_schema

TOOL_OUTPUT_PREFIX = "ahp-tool-output:/"


def annotations_state(session):
    rows = Annotation.objects.filter(session=session).order_by("created", "pk")
    return {"annotations": [row.to_wire() for row in rows]}


def read_host_resource(principal, uri):
    """The text of a resource the host itself holds, or None when the URI is not the host's."""
    visible = Session.objects.visible_to(principal)
    kind, key = parse(uri)
    if kind in ("session", "annotations"):
        session = visible.filter(id=key).first()
        if session is None:
            raise Refused(f"No resource {uri} here.")
        return json.dumps(state.session_state(session, session_config_schema(session.provider)) if kind == "session" else annotations_state(session), indent=1)
    if kind == "chat":
        chat = Chat.objects.filter(id=key, session__in=visible).first()
        if chat is None:
            raise Refused(f"No resource {uri} here.")
        return json.dumps(state.chat_state(chat), indent=1)
    if isinstance(uri, str) and uri.startswith(TOOL_OUTPUT_PREFIX):
        call = ToolCall.objects.filter(id__in=[uri[len(TOOL_OUTPUT_PREFIX):]] if _is_uuid(uri[len(TOOL_OUTPUT_PREFIX):])
                                       else [], turn__chat__session__in=visible).first()
        if call is None or call.result is None:
            raise Refused(f"No resource {uri} here.")
        from tools_app.catalog.bounding import result_text
        from tools_app.models import FullToolOutput

        full = FullToolOutput.objects.filter(call=call).first()
        return full.text if full else result_text(call.result)
    return None


def _is_uuid(text):
    import uuid

    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


async def ahp_resource(context, arguments):
    uri = arguments["uri"]
    text = await database_sync_to_async(read_host_resource)(context.principal, uri)
    if text is not None:
        return text
    clients = await database_sync_to_async(
        lambda: list(ActiveClient.objects.filter(session=context.session).order_by("id")
                     .values_list("client_id", "owner_id"))
    )()
    reasons = []
    for client_id, owner_id in clients:
        ok, text = await ask_client(context.session.tenant_id, client_id, uri, owner_id=owner_id)
        if ok:
            return text
        reasons.append(text)
    if not clients:
        raise Refused(f"No resource {uri}: it is not the host's, and no client of this session publishes resources.")
    raise Refused(f"No resource {uri}: " + "; ".join(reasons) + ".")


RESOURCE_TOOLS = (
    Tool("ahp_resource", title="Read Resource",
         description=("Read a resource by URI: this host's sessions, chats, annotations and tool outputs, or a "
                      "resource a connected client of this session publishes."),
         input_schema={"type": "object", "properties": {"uri": {"type": "string", "minLength": 1}}, "required": ["uri"]},
         executor=ahp_resource, annotations={"readOnlyHint": True}, effects=frozenset({"reads"})),
)
