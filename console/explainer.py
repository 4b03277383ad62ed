"""The catalog explainer: every tool of every source, offered or hidden and why, read straight
from the snapshot the model is offered, so the two never disagree."""
from tools_app.catalog.loader import catalog_for_chat, preview_catalog

ORIGIN_KINDS = (("user", "a chat a person started"), ("tool", "a chat a tool started"))


def explained(snapshot):
    """{"tools": [{name, source, offered, reason?}], "instructions": [...]}: the offered tools in
    the order the model sees them, then the hidden ones with the sentence of the rule that hid each."""
    offered = [{"name": d["name"], "source": snapshot.bindings[d["name"]].tool.source, "offered": True,
                "deferred": d["name"] in snapshot.deferred} for d in snapshot.definitions]
    hidden = [{"name": h.name, "source": h.source, "offered": False, "reason": h.reason} for h in snapshot.hidden]
    return {"tools": offered + hidden, "instructions": list(snapshot.instructions)}


def explain_chat(chat):
    return explained(catalog_for_chat(chat))


def explain_preview(tenant, provider, chat_origin_kind="user", agent_definition=""):
    return explained(preview_catalog(tenant, provider, chat_origin_kind, agent_definition))
