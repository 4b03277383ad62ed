"""The per-session MCP tools endpoint's tokens: one per person's ApiToken, one for the agent."""
from django.db import IntegrityError, transaction

from ..models import ToolsEndpoint
from .checks import require


@transaction.atomic
def do_open_tools_endpoint(principal, session, api_token=None):
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
        return endpoint.first()
