"""`ahp_terminals`: the terminals the host has open."""
from tools_app.catalog.registry import Tool


def ahp_terminals(context, arguments):
    """This host opens no terminals of its own: it has no terminal channel and no createTerminal
    command, so there is never a line (uri, title, cwd, running) to list."""
    return "No terminals are open on this host."


TERMINAL_TOOLS = (
    Tool("ahp_terminals", title="List Terminals",
         description="List the terminals the host has open, one line each: uri, title, cwd, running.",
         executor=ahp_terminals, annotations={"readOnlyHint": True}, effects=frozenset({"reads"})),
)
