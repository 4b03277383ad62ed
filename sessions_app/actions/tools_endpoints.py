"""The per-session MCP tools endpoint: its tokens (one per person's ApiToken, one for the agent),
and the turn the host begins for an attached agent's calls."""
import uuid
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from grants.models import ApiToken, Principal

from ..models import Session, ToolCall, ToolsEndpoint, Turn
from .checks import require
from .turns import ENDPOINT_TURN_CLIENT_ID, do_end_turn


@transaction.atomic
def do_open_tools_endpoint(principal: Principal, session: Session, api_token: ApiToken | None = None) -> ToolsEndpoint:
    """The session's tools endpoint token for `api_token` (acting as its person), or, without
    one, for the agent the host starts (acting as the person whose turn it answers). Opened on
    first use; asking again answers the same token."""
    require(principal, "session:write", session)
    rows = ToolsEndpoint.objects.select_for_update().filter(session=session)
    endpoint = rows.filter(api_token=api_token) if api_token is not None else rows.filter(api_token__isnull=True)
    existing = endpoint.first()
    if existing is not None:
        return existing
    try:
        with transaction.atomic():
            return ToolsEndpoint.open(session, api_token=api_token)
    except IntegrityError:  # the same holder asked at the same moment: theirs is the one
        return endpoint.get()


@transaction.atomic
def do_end_quiet_endpoint_turn(turn_id: uuid.UUID | str, quiet_seconds: float) -> float | None:
    """End a turn the host began for an attached agent once none of its calls is open and none
    completed in the last `quiet_seconds` (0: now, if none is open). Answers None when the turn
    is over (ended here or before), else the seconds after which to ask again."""
    turn = Turn.objects.select_for_update().filter(
        pk=turn_id, client_id=ENDPOINT_TURN_CLIENT_ID, state="active").first()
    if turn is None:
        return None
    calls = ToolCall.objects.filter(turn=turn)
    if calls.filter(completed__isnull=True).exists():
        return quiet_seconds
    last = calls.aggregate(last=Max("completed"))["last"] or turn.started
    left = (last + timedelta(seconds=quiet_seconds) - timezone.now()).total_seconds()
    if left > 0:
        return left
    do_end_turn(turn.pk, response_text=None)
    return None
