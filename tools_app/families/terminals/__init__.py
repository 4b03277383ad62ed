"""Terminals (`ahp-terminal:` channels) and `ahp_terminals`, which lists a session's."""
from tools_app.catalog.registry import Tool


def ahp_terminals(context, arguments):
    """One line per terminal of the calling session: uri, title, cwd, running."""
    from sessions_app.actions import require

    from .models import Terminal

    require(context.principal, "terminal:read", context.session)
    rows = Terminal.objects.filter(session=context.session).order_by("created")
    lines = [f"{t.uri}\t{t.title}\t{t.cwd}\t{'running' if t.exit_code is None else f'exited {t.exit_code}'}"
             for t in rows]
    return "\n".join(lines) or "No terminals are open in this session."


TERMINAL_TOOLS = (
    Tool("ahp_terminals", title="List Terminals",
         description="List the session's terminals, one line each: uri, title, cwd, running.",
         executor=ahp_terminals, annotations={"readOnlyHint": True}, effects=frozenset({"reads"})),
)
