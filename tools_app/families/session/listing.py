"""list_sessions, get_current_session, list_agents and list_models: what an agent may see."""
import copy
import json
from datetime import datetime

from django.db.models import TextField
from django.db.models.functions import Cast

from agents.registry import PROVIDERS
from kernel.refusals import Refused
from sessions_app.actions import require
from sessions_app.models import Chat, Session, Turn, iso

from ...chat_provider import answering, backend_providers
from .links import open_link, resolve

STATUS_WORDS = ("idle", "inProgress", "inputNeeded", "error", "archived")
DEFAULT_CONFIG_SCHEMA = {
    "type": "object",
    "properties": {
        "model": {"type": "string", "title": "Model", "sessionMutable": True},
        "agentDefinition": {"type": "string", "title": "Agent definition"},
        "isolation": {"type": "string", "title": "Isolation", "enum": ["folder", "worktree"]},
    },
    "additionalProperties": False,
}
MODELS_PER_AGENT = 5
MAX_LISTED = 100


def status_words(bits):
    """The AHP status bits as words; inputNeeded includes the inProgress bit, so it goes first."""
    words = []
    if bits & Session.INPUT_NEEDED == Session.INPUT_NEEDED:
        words.append("inputNeeded")
    elif bits & Session.IN_PROGRESS:
        words.append("inProgress")
    elif bits & Session.IDLE:
        words.append("idle")
    if bits & Session.ERROR:
        words.append("error")
    if bits & Session.IS_ARCHIVED:
        words.append("archived")
    return words


def chat_status(chat):
    return "inProgress" if chat.turns.filter(state="active").exists() else "idle"


def listed_chats(sessions):
    """Each session's row chats, by session id, for those with a chat besides their default: main
    first, worker and hidden (archived) chats left out. Three queries for any number of sessions.
    The chats are read as the few columns a row shows, not as models: most are default chats
    read only to be dropped, and a hundred models cost as much as the rest of the listing."""
    by_session = {}
    chats = (Chat.objects.filter(session__in=[s.pk for s in sessions], archived=False).exclude(origin_kind="tool")
             .order_by("-is_default", "created").values_list("id", "session_id", "title", "is_default", named=True))
    for chat in chats:
        by_session.setdefault(chat.session_id, []).append(chat)
    by_session = {pk: chats for pk, chats in by_session.items() if any(not c.is_default for c in chats)}
    shown = [c.id for chats in by_session.values() for c in chats]
    if not shown:
        return {}
    backends = backend_providers(shown)
    busy = set(Turn.objects.filter(chat__in=shown, state="active").values_list("chat_id", flat=True))
    rows = {}
    for session in sessions:
        for chat in by_session.get(session.pk, ()):
            row = {"title": chat.title, "openLink": open_link(session, chat),
                   "status": "inProgress" if chat.id in busy else "idle"}
            if chat.is_default:
                row["main"] = True
            harness = answering(backends.get(chat.id), session)
            if harness != session.provider:
                row["harness"] = harness
            rows.setdefault(session.pk, []).append(row)
    return rows


def session_rows(sessions):
    chats = listed_chats(sessions)
    rows = []
    for session in sessions:
        row = {"session": session.uri, "openLink": open_link(session), "title": session.title,
               "status": ",".join(status_words(session.wire_status)), "createdAt": iso(session.created),
               "modifiedAt": iso(session.modified), "unread": not session.read}
        if session.working_directories:
            row["workingDirectory"] = session.working_directories[0]
            if len(session.working_directories) > 1:
                row["workingDirectories"] = list(session.working_directories)
        if session.pk in chats:
            row["chats"] = chats[session.pk]
        rows.append(row)
    return rows


def _moment(arguments, key):
    value = arguments.get(key)
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise Refused(f"Invalid list_sessions input: {key} must be an ISO-8601 timestamp "
                      f"(e.g. 2025-01-31T00:00:00Z).", "invalid") from None


def _folder(text):
    return text[len("file://"):] if text.startswith("file://") else text


def list_sessions(context, arguments):
    """Cut to what the person may read: the whole catalogue with session:read, nothing without."""
    sessions = Session.objects.visible_to(context.principal).listed().order_by("-modified", "-id")  # stable pages
    if arguments.get("session"):
        session, _ = resolve(context.principal, arguments["session"])
        return json.dumps({"sessions": session_rows([session])})
    after, before = _moment(arguments, "createdAfter"), _moment(arguments, "createdBefore")
    if after:
        sessions = sessions.filter(created__gte=after)
    if before:
        sessions = sessions.filter(created__lte=before)
    if arguments.get("unread"):
        sessions = sessions.filter(read=False)
    wanted = set(arguments.get("status") or ())
    if not arguments.get("includeArchived") and "archived" not in wanted:
        sessions = sessions.filter(archived=False)
    workspace = arguments.get("workspace")
    folder = _folder(workspace).rstrip("/") if workspace else ""
    # (Not for a folder past any real path's length: SQLite refuses LIKE patterns over 50000 bytes.)
    if folder and len(folder) <= 4096 and folder.isascii() and folder.isprintable() and not set(folder) & {'"', "\\"}:
        # The database drops rows whose folders cannot match (a plain path reads the same in the
        # column's JSON text); the exact comparison below decides.
        sessions = sessions.annotate(folders=Cast("working_directories", TextField())).filter(folders__contains=folder)

    def kept(session):
        if wanted and not wanted & set(status_words(session.wire_status)):
            return False
        return not workspace or folder in {_folder(d).rstrip("/") for d in session.working_directories}

    # Newest first, and no more than MAX_LISTED: past that the answer would outgrow what a tool
    # result may carry. Read in LIMITed pages, so the database walks the (tenant, modified)
    # index instead of sorting the whole tenant.
    matching, offset, page = [], 0, MAX_LISTED + 1
    while len(matching) <= MAX_LISTED:
        chunk = list(sessions[offset:offset + page])
        matching += [s for s in chunk if kept(s)]
        if len(chunk) < page:
            break
        offset += page
    answer = {"sessions": session_rows(matching[:MAX_LISTED])}
    if len(matching) > MAX_LISTED:
        answer["truncated"] = (f"Only the {MAX_LISTED} most recently modified matching sessions are listed; "
                               "narrow the list with the filters to see others.")
    return json.dumps(answer)


def get_current_session(context, arguments):
    require(context.principal, "session:read", context.session)
    return json.dumps(session_rows([Session.objects.listed().get(pk=context.session.pk)])[0])


def config_schema(provider):
    return getattr(provider, "config_schema", None) or DEFAULT_CONFIG_SCHEMA


def session_config_schema(provider_id):
    """The session config schema of the agent `provider_id` as clients see it (session snapshots,
    resolveSessionConfig): its own, with the models it runs named in `model`."""
    provider = PROVIDERS.get(provider_id)
    schema = copy.deepcopy(config_schema(provider))
    model, models = schema.get("properties", {}).get("model"), list(getattr(provider, "models", ()))
    if model is not None and models:
        model.update(enum=[m["id"] for m in models], enumLabels=[m.get("name", m["id"]) for m in models])
    return schema


def agent_row(provider):
    models = list(getattr(provider, "models", ()))[:MODELS_PER_AGENT]
    return {"id": provider.id, "displayName": getattr(provider, "display_name", provider.id),
            "settings": sorted(config_schema(provider).get("properties", {})),
            "models": [{"id": m["id"], "name": m.get("name", m["id"])} for m in models]}


def startable_agents():
    """The agents the host can start now: an agent whose program is missing is left out."""
    return [p for p in PROVIDERS.values() if getattr(p, "runtime_missing", lambda: None)() is None]


def agents_for(principal):
    """The agents `principal` may start: none without session:create, else the startable ones."""
    return startable_agents() if principal.may("session:create") else []


def list_agents(context, arguments):
    require(context.principal, "session:read", context.session)
    return json.dumps({"agents": [agent_row(p) for p in agents_for(context.principal)]})


def list_models(context, arguments):
    require(context.principal, "session:read", context.session)
    agent = arguments.get("agent")
    startable = {p.id: p for p in agents_for(context.principal)}
    if agent is not None and agent not in startable:
        raise Refused(f'No agent "{agent}" you may start; list_agents names the agents you may.', "not_found")
    providers = [startable[agent]] if agent else startable.values()
    return json.dumps({"models": [{"id": m["id"], "name": m.get("name", m["id"]), "agent": p.id}
                                  for p in providers for m in getattr(p, "models", ())]})
