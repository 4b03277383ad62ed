"""The catalog explainer: every tool the model receives and every one it does not, and why, read
from the same pure assembly the model's snapshot comes from, so the two never disagree. Beside
the catalog: the CLI built-ins a harness provider hands its model itself, the configured MCP
servers (listed, failed, left out, the listed tools dropped) and the clients whose tools are offered, connected or not."""
from dataclasses import replace
from typing import Callable

from django.utils import timezone

from agents.registry import get_provider
from grants.models import Tenant
from sessions_app.models import ActiveClient, Chat, Session
from tools_app.catalog.catalog import CatalogInputs, CatalogSnapshot, assemble_catalog
from tools_app.catalog.hidden import HiddenTool
from tools_app.catalog.loader import catalog_for_chat, catalog_inputs
from tools_app.catalog.registry import InvalidTool
from tools_app.families.mcp_servers.models import SessionMcpServers
from tools_app.families.mcp_servers.server_tools import listed_tool
from tools_app.families.mcp_servers.servers import entry_problem
from tools_app.models import AgentDefinition, HostConfig

ORIGIN_KINDS = (("user", "a chat a person started"), ("tool", "a chat a tool started"))
SOURCE_LABELS = {"host": "host", "plugin": "plugin", "client": "client", "mcp": "MCP server"}
BUILTIN = "CLI built-in"
LISTINGS_READ = 50  # a preview reads the newest sessions' listings, not every session's

DEFERRED = ("Offered, marked deferred: a hint that the model may load its full definition on demand; "
            "every provider of this host receives it like any other tool.")
NOT_ENABLED = "{name} is not offered in this session: the tool's own check for the session said no. {why}"

# Undoing one rule, so the assembly shows the next rule that would still hide a tool. The tool's
# own per-session check (not_enabled) and an invalid definition cannot be undone: they come last.
UNDO: dict[str, Callable[[CatalogInputs], CatalogInputs]] = {
    "host_tools_off": lambda i: replace(i, switches=replace(i.switches, without_host_tools=())),
    "advanced": lambda i: replace(i, switches=replace(i.switches, advanced_tools=True)),
    "session_tools_off": lambda i: replace(i, switches=replace(i.switches, session_tools=True)),
    "provider_scoping": lambda i: replace(i, switches=replace(i.switches, session_tools_providers=())),
    "allowlist": lambda i: replace(i, allowlist=None),
    "permission_rule": lambda i: replace(i, permission_rules=()),
    "tool_chat": lambda i: replace(i, chat_origin_kind="user"),
}


def every_rule(inputs: CatalogInputs, snapshot: CatalogSnapshot) -> dict[str, list[HiddenTool]]:
    """{hidden tool name: every rule that hides it, in the order the catalog checks them}: the
    assembly is run again with each rule found undone, until no new rule shows."""
    rules = {hidden.name: [hidden] for hidden in snapshot.hidden}
    undone: set[str] = set()
    hidden = snapshot.hidden
    while True:
        to_undo = {h.rule for h in hidden if h.rule in UNDO} - undone
        if not to_undo:
            return rules
        for rule in sorted(to_undo):
            inputs = UNDO[rule](inputs)
        undone |= to_undo
        hidden = assemble_catalog(inputs).hidden
        for h in hidden:
            if h.name in rules and h.rule not in [r.rule for r in rules[h.name]]:
                rules[h.name].append(h)


def sentence(hidden: HiddenTool, inputs: CatalogInputs) -> str:
    if hidden.rule != "not_enabled":
        return hidden.reason
    hook = next((t.is_enabled_for_session for t in inputs.tools if t.effective_name == hidden.name), None)
    why = " ".join((hook.__doc__ or "").split()) if hook else ""
    return NOT_ENABLED.format(name=hidden.name, why=why).strip()


def client_labels(session: Session) -> dict[str, str]:
    """{client id: how the console names it}: a client whose connections are gone keeps its
    place, and its tools stay offered, until its release time."""
    if session._state.adding:
        return {}
    labels = {}
    for client in ActiveClient.objects.filter(session=session):
        name = f"client {client.client_id}"
        if client.release_at:
            name += f" (disconnected; its tools stay until {timezone.localtime(client.release_at):%H:%M:%S})"
        labels[client.client_id] = name
    return labels


def source_label(binding, clients: dict[str, str]) -> str:
    tool = binding.tool
    if binding.client_id:
        return clients.get(binding.client_id, f"client {binding.client_id}")
    if tool.source == "mcp":
        return f"MCP server {tool.namespace}"
    return SOURCE_LABELS.get(tool.source, tool.source)


def builtins(session: Session) -> list[dict]:
    """The CLI built-ins a harness provider hands its model itself (the host's catalog never
    holds them), as the provider's policy for this session's agent definition says."""
    provider = get_provider(session.provider)
    if provider is None or not hasattr(provider, "offered_builtins"):
        return []
    name = (session.config or {}).get("agentDefinition")
    definition = None
    if name and AgentDefinition.document_for_session(session) is not None:
        definition = AgentDefinition.objects.for_tenant(session.tenant).get(name=name)
    offered, excluded = provider.offered_builtins(definition)
    rows = [{"name": n, "source": "builtin", "label": BUILTIN, "offered": True, "reasons": []} for n in offered or ()]
    if offered is None:
        rows.append({"name": "(every built-in of the CLI)", "source": "builtin", "label": BUILTIN, "offered": True,
                     "reasons": []})
    rows += [{"name": n, "source": "builtin", "label": BUILTIN, "offered": False,
              "reasons": [f"{n} is among the built-ins the session's agent definition excludes."]} for n in excluded]
    return rows


def dropped(name: str, listing: dict) -> list[dict]:
    """The entries of server `name`'s listing the catalog leaves out (their names break its
    pattern), as hidden tool rows with the reason."""
    rows = []
    for definition in listing.get("tools") or ():
        try:
            listed_tool(name, definition)
        except InvalidTool as exc:
            reason = f"Dropped: MCP server {name} lists {definition.get('name')!r}, which the host cannot offer ({exc})."
            rows.append({"name": f"{name}_{definition.get('name')}", "source": "mcp", "label": f"MCP server {name}",
                         "offered": False, "dropped": True, "reasons": [reason], "reason": reason})
    return rows


def latest_listings(tenant: Tenant, configured: dict) -> dict[str, tuple[dict, str]]:
    """{server name: (its newest listing by a session of `tenant` that started with the entry as
    configured now, when it was made)}: what a session not yet created will most likely be offered."""
    found: dict[str, tuple[dict, str]] = {}
    for row in SessionMcpServers.objects.filter(session__tenant=tenant).order_by("-modified")[:LISTINGS_READ]:
        for name, listing in (row.server_tools or {}).items():
            if name not in found and (row.servers or {}).get(name) == configured.get(name):
                found[name] = (listing, f"{timezone.localtime(row.modified):%Y-%m-%d %H:%M:%S}")
    return found


def servers(session: Session, taken: set[str]) -> tuple[list[dict], list[dict]]:
    """Each of the tenant's mcpServers for this session: listed (its tools are in the catalog),
    failed and why, left out at the session's start and why; and MCP tools a host or plugin tool
    of the same name shadows. A session not yet created reads the newest listing of each entry.
    Beside them, the listed tools the catalog dropped, as hidden tool rows."""
    configured = HostConfig.for_tenant(session.tenant).mcp_servers or {}
    preview = session._state.adding
    row = None if preview else SessionMcpServers.objects.filter(session=session).first()
    kept = (row.servers or {}) if row else {n: e for n, e in configured.items() if not entry_problem(e)}
    latest = latest_listings(session.tenant, configured) if preview else {}
    listings = {n: listing for n, (listing, _) in latest.items()} if preview else (row.server_tools if row else {})
    answer, dropped_rows = [], []
    for name in sorted(set(configured) | set(kept)):
        problem = None if name in kept else entry_problem(configured[name])
        listing = listings.get(name) or {}
        lost = dropped(name, listing) if not problem and name in kept else []
        dropped_rows += lost
        if problem:
            state = f"Left out: mcpServers.{name} is not usable ({problem}); none of its tools are offered."
        elif name not in kept:
            state = f"Added after this session started: only sessions started since then use {name}."
        elif "error" in listing:
            state = f"Failed: {listing['error']}. None of its tools are offered."
        elif "tools" in listing:
            where = "a new session offers them once it lists them" if preview else "they are in the catalog above"
            state = f"Listed {len(listing['tools']) - len(lost)} tool(s); {where}."
            shadowed = [t.get("name") for t in listing["tools"] if f"{name}_{t.get('name')}" in taken]
            if shadowed:
                state += f" Not offered: {', '.join(shadowed)}, since a host or plugin tool of the same name wins."
            if lost:
                state += f" Dropped {len(lost)}, with the reason: {', '.join(r['name'] for r in lost)}."
        else:
            state = "Its tools are listed when a session starts using it." if preview else (
                "Not listed yet: its tools join the catalog once the host has listed them.")
        if name in latest:
            state = f"As a session listed it at {latest[name][1]}: {state}"
        answer.append({"name": name, "state": state, "failed": "error" in listing or bool(problem)})
    return answer, dropped_rows


def explained(session: Session, inputs: CatalogInputs, snapshot: CatalogSnapshot) -> dict:
    """{"tools": [{name, source, label, offered, deferred?, reasons}], "builtins": [...], "servers":
    [...], "instructions": [...], "deferred_means": a sentence}: the offered tools in the order the model sees them, then the hidden
    ones with the sentence of every rule that hides each."""
    clients = client_labels(session)
    offered = [{"name": d["name"], "source": snapshot.bindings[d["name"]].tool.source,
                "label": source_label(snapshot.bindings[d["name"]], clients), "offered": True,
                "deferred": d["name"] in snapshot.deferred, "reasons": []} for d in snapshot.definitions]
    rules = every_rule(inputs, snapshot)
    hidden = [{"name": h.name, "source": h.source, "label": SOURCE_LABELS.get(h.source, h.source), "offered": False,
               "reasons": [sentence(r, inputs) for r in rules[h.name]]} for h in snapshot.hidden]
    for row in hidden:
        row["reason"] = " ".join(row["reasons"])
    taken = {t.effective_name for t in inputs.tools if t.source != "mcp"}
    server_rows, dropped_rows = servers(session, taken)
    return {"tools": offered + hidden + dropped_rows, "builtins": builtins(session), "servers": server_rows,
            "instructions": list(snapshot.instructions), "deferred_means": DEFERRED}


def explain_chat(chat: Chat) -> dict:
    session = chat.session
    return explained(session, catalog_inputs(session, chat.origin_kind), catalog_for_chat(chat))


def explain_preview(tenant: Tenant, provider: str, chat_origin_kind: str = "user", agent_definition: str = "") -> dict:
    """The same answer for a session not yet created: a provider, a chat origin, an agent definition."""
    config = {"agentDefinition": agent_definition} if agent_definition else {}
    session = Session(tenant=tenant, provider=provider, config=config)
    inputs = catalog_inputs(session, chat_origin_kind)
    return explained(session, inputs, assemble_catalog(inputs))
