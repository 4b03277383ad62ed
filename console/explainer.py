"""The catalog explainer: every tool of every source, offered or hidden and why, read straight
from the snapshot the model is offered, so the two never disagree."""
from tools_app.catalog.catalog import CatalogSnapshot
from tools_app.catalog.loader import catalog_for_chat, preview_catalog
from tools_app.catalog.registry import Binding

ORIGIN_KINDS = (("user", "a chat a person started"), ("tool", "a chat a tool started"))


SOURCE_LABELS = {"host": "host", "plugin": "plugin", "client": "client", "mcp": "MCP server"}


def source_label(binding: Binding) -> str:
    """Who provides an offered tool, as the console names it: the client or MCP server by name."""
    tool = binding.tool
    if binding.client_id:
        return f"client {binding.client_id}"
    if tool.source == "mcp":
        return f"MCP server {tool.namespace}"
    return SOURCE_LABELS.get(tool.source, tool.source)


def explained(snapshot: CatalogSnapshot) -> dict:
    """{"tools": [{name, source, label, offered, reason?}], "instructions": [...]}: the offered tools in
    the order the model sees them, then the hidden ones with the sentence of the rule that hid each."""
    offered = [{"name": d["name"], "source": snapshot.bindings[d["name"]].tool.source,
                "label": source_label(snapshot.bindings[d["name"]]), "offered": True,
                "deferred": d["name"] in snapshot.deferred} for d in snapshot.definitions]
    hidden = [{"name": h.name, "source": h.source, "offered": False, "reason": h.reason} for h in snapshot.hidden]
    return {"tools": offered + hidden, "instructions": list(snapshot.instructions)}


def explain_chat(chat):
    return explained(catalog_for_chat(chat))


def explain_preview(tenant, provider, chat_origin_kind="user", agent_definition=""):
    return explained(preview_catalog(tenant, provider, chat_origin_kind, agent_definition))
