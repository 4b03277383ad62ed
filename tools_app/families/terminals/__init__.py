"""Terminals (`ahp-terminal:` channels) and `ahp_terminals`, which lists the host's open ones."""
from typing import Any

from tools_app.catalog.registry import Tool


def ahp_terminals(context: Any, arguments: dict) -> str:
    """One line per terminal the host has open (every session's, in the calling session's tenant:
    the host a tenant sees), oldest first: uri, title, cwd, running. Read-only and no grant, as the
    Tools page has it; a terminal that exited is no longer open and is not listed."""
    from .actions import end_orphans_of
    from .models import Terminal

    end_orphans_of(context.session.tenant_id)
    rows = Terminal.objects.for_tenant(context.session.tenant_id).filter(exit_code__isnull=True).order_by(
        "created", "id")
    lines = [f"{t.uri}\t{t.title}\t{t.cwd}\trunning" for t in rows]
    return "\n".join(lines) or "No terminals are open on this host."


TERMINAL_TOOLS = (
    Tool("ahp_terminals", title="List Terminals",
         description="List the terminals this host has open, one line each: uri, title, cwd, running.",
         executor=ahp_terminals, annotations={"readOnlyHint": True}, effects=frozenset({"reads"})),
)
