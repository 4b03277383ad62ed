"""The writing session tools: create_session, create_chat, send_message, rename_chat,
archive_chat, delete_session and move_session. Each asks session:write (archive_chat: the
mark grants) of the person behind the turn, then acts through sessions_app.actions."""
import json

from django.db import transaction
from jsonschema import Draft202012Validator

from agents.registry import PROVIDERS
from grants.models import Principal
from kernel.after_commit import after_commit
from kernel.refusals import Refused
from sessions_app import actions
from sessions_app.actions import Orchestration, require
from sessions_app.models import ChatDraft, Session, Turn

from ...chat_provider import provider_of
from ...models import HostConfig
from ...sessions import capture_servers, check_definition, do_end_session
from ...turn_launcher import launch_turn
from .links import open_link, require_write, resolve
from .listing import agents_for, config_schema

# The settings the host decides for a new session: they win over same-name keys of `config`.
HOST_OWNED_SETTINGS = ("isolation", "model")


def orchestration_of(context):
    config = HostConfig.current(context.principal.tenant)
    return Orchestration(session=context.session, enabled=config.agent_orchestration_limits == "on",
                         scope=config.agent_orchestration_limits_scope)


def launch_after_commit(started):
    """A turn a tool began runs once its rows are committed; a queued message waits its turn."""
    if started is not None and hasattr(started, "state"):
        after_commit(f"running turn {started.id}", lambda: launch_turn(started.id))


def needs_session(tool_name):
    return Refused(f'{tool_name} needs a session to act on when no session calls it; name one with "session".',
                   "invalid")


def _model_provider(model):
    for provider in PROVIDERS.values():
        if any(model in (m["id"], m.get("name")) for m in getattr(provider, "models", ())):
            return provider.id
    raise Refused(f'No agent offers a model "{model}"; list_models names the models there are.', "invalid")


def choose_agent(context, arguments):
    """The named agent, else the model's, else the calling chat's, else the first."""
    agent = arguments.get("agent")
    if agent is None and arguments.get("model"):
        agent = _model_provider(arguments["model"])
    if agent is None:
        agent = (provider_of(context.chat) if context.chat is not None else None) or next(iter(PROVIDERS))
    startable = [p.id for p in agents_for(context.principal)]
    if agent not in startable:
        raise Refused(f'No agent "{agent}" to start; choose one of: {", ".join(startable)}.', "invalid")
    return agent


def calling_model(context):
    """The calling chat's model: its running turn's, else its draft's (the message being composed
    there), else its last turn's that named one."""
    if context.turn is not None and getattr(context.turn, "model", ""):
        return context.turn.model
    if context.chat is None:
        return None
    drafted = ChatDraft.objects.filter(chat=context.chat).exclude(model="").values_list("model", flat=True).first()
    if drafted:
        return drafted
    return (Turn.objects.filter(chat=context.chat).exclude(model="").order_by("-started")
            .values_list("model", flat=True).first())


def inherited_settings(context, agent):
    """Settings the call leaves unnamed come from the calling session, where the new agent's
    schema accepts them; its model (the calling chat's, else the session's) only when both run
    one backend."""
    if context.session is None:
        return {}
    accepted = config_schema(PROVIDERS[agent]).get("properties", {})
    settings = {k: v for k, v in (context.session.config or {}).items() if k in accepted}
    model = calling_model(context) or settings.get("model")
    settings.pop("model", None)
    if model and context.chat is not None and agent == provider_of(context.chat):
        settings["model"] = model
    return settings


def session_config(context, arguments, agent):
    config = arguments.get("config") or {}
    error = next(iter(sorted(Draft202012Validator(config_schema(PROVIDERS[agent])).iter_errors(config),
                             key=lambda e: e.path)), None)
    if error is not None:
        pointer = "/" + "/".join(str(p) for p in error.absolute_path)
        raise Refused(f"Invalid config for agent {agent} at {pointer}: {error.message}", "invalid")
    host = {}
    if arguments.get("model"):
        host["model"] = arguments["model"]
    if arguments.get("workspace"):
        host["isolation"] = "worktree" if arguments.get("worktree") else "folder"
    return {**inherited_settings(context, agent), **config, **host}


def worker_origin(context):
    """A chat a tool call makes is that call's worker chat (origin kind `tool`), so what only
    chats a person started may use (userChats tools, isolate_session) is not offered in it. A
    sessionless call has no calling chat: its chat is an ordinary one."""
    if context.chat is None:
        return None
    return {"kind": "tool", "chat_id": context.chat.pk, "tool_call_id": context.tool_call_id}


def _folder_uri(text):
    return text if "://" in text else f"file://{text}"


def create_session(context, arguments):
    principal = context.principal
    require_write(principal, context.session)
    # As the reference host: a new chat here unless asked otherwise; a sessionless caller has no "here".
    relationship = arguments.get("relationship", "currentSession" if context.session is not None else "independent")
    agent = choose_agent(context, arguments)
    config = session_config(context, arguments, agent)
    orchestration = orchestration_of(context)
    if relationship == "currentSession":
        if context.session is None:
            raise Refused("currentSession needs a calling session; use independent", "invalid")
        chat, started = actions.do_tool_create_chat(principal, orchestration, context.session, arguments["title"],
                                                    arguments["prompt"], provider=agent,
                                                    source=worker_origin(context), config=config)
        launch_after_commit(started)
        return json.dumps({"relationship": relationship, "chat": chat.uri,
                           "openLink": open_link(context.session, chat), "agent": agent})
    folders = [_folder_uri(arguments["workspace"])] if arguments.get("workspace") else []
    # The new session is the calling session's owner's, whoever sent the turn that asked for it.
    owner = context.session.owner if context.session is not None else None
    session, chat, started = do_tool_start_session(principal, orchestration, agent, arguments["title"],
                                                   arguments["prompt"], folders, config, owner)
    launch_after_commit(started)
    return json.dumps({"relationship": relationship, "session": session.uri, "openLink": open_link(session),
                       "agent": agent})


def _target_session(context, arguments, tool_name):
    if arguments.get("session"):
        return resolve(context.principal, arguments["session"])[0]
    if context.session is None:
        raise needs_session(tool_name)
    return context.session


def create_chat(context, arguments):
    principal = context.principal
    session = _target_session(context, arguments, "create_chat")
    require_write(principal, session)
    agent = arguments.get("agent") or ""
    startable = [p.id for p in agents_for(principal)]
    if agent and agent not in startable:
        raise Refused(f'No agent "{agent}" to start; choose one of: {", ".join(startable)}.', "invalid")
    chat, started = actions.do_tool_create_chat(principal, orchestration_of(context), session, arguments["title"],
                                                arguments.get("prompt"), provider=agent,
                                                source=worker_origin(context))
    launch_after_commit(started)
    return json.dumps({"chat": chat.uri, "openLink": open_link(session, chat)})


def send_message(context, arguments):
    principal = context.principal
    require_write(principal, context.session)
    session, chat = resolve(principal, arguments["session"])
    require_write(principal, session)
    if context.chat is not None and chat.pk == context.chat.pk:
        raise Refused("send_message cannot message the chat it runs in.", "conflict")
    turn, pending = actions.do_tool_send_message(principal, orchestration_of(context), chat, arguments["message"],
                                                 sender_chat=context.chat)
    launch_after_commit(turn)
    answer = {"chat": chat.uri, "openLink": open_link(session, chat)}
    if turn is not None:
        answer.update(delivery="started", turnId=str(turn.id))
    else:
        answer.update(delivery="queued", messageId=str(pending.id))
    return json.dumps(answer)


def rename_chat(context, arguments):
    principal = context.principal
    require_write(principal, context.session)
    if arguments.get("chat"):
        session, chat = resolve(principal, arguments["chat"])
        if arguments.get("session") and resolve(principal, arguments["session"])[0].pk != session.pk:
            raise Refused("That chat is not in that session.", "invalid")
    elif arguments.get("session"):
        session, chat = resolve(principal, arguments["session"])
    elif context.chat is not None:
        session, chat = context.session, context.chat
    else:
        raise needs_session("rename_chat")
    require_write(principal, session)
    actions.do_rename_chat(principal, chat, arguments["title"])
    return json.dumps({"chat": chat.uri, "title": arguments["title"], "openLink": open_link(session, chat)})


def archive_chat(context, arguments):
    """A nested chat alone; the whole session for its main chat or a session link."""
    principal = context.principal
    if principal.person is None:  # a turn nobody is behind holds no write at all
        require_write(principal, context.session)
    reference = arguments.get("chat") or arguments.get("session")
    if not reference:
        raise needs_session("archive_chat")
    session, chat = resolve(principal, reference)
    whole_session = chat.is_default or "?chat=" not in reference and not reference.startswith("ahp-chat:/")
    if context.chat is not None and chat.pk == context.chat.pk:
        raise Refused("archive_chat cannot archive the chat it runs in.", "conflict")
    if whole_session and context.session is not None and session.pk == context.session.pk:
        raise Refused("archive_chat cannot archive its own session's main chat.", "conflict")
    if whole_session:
        require(principal, "session:mark", session)
        actions.do_set_flag(principal, session, "isArchived", True)
        return json.dumps({"archived": session.uri})
    require(principal, "chat:mark", session)
    actions.do_archive_chat(principal, chat)
    return json.dumps({"archived": chat.uri})


@transaction.atomic
def do_tool_start_session(principal, orchestration, agent, title, prompt, folders, config, owner=None):
    """create_session (independent), with the new session's MCP servers captured; `owner` (the
    calling session's) owns it, else `principal`'s person."""
    check_definition(principal.tenant, agent, config)
    session, chat, started = actions.do_tool_create_session(principal, orchestration, agent, title, prompt, folders,
                                                            config, owner)
    capture_servers(session)
    return session, chat, started


def delete_session(context, arguments):
    """As the person whose turn called it; as the calling session's owner when no turn runs."""
    principal = context.principal
    if context.turn is None and context.session is not None:
        owner = context.session.owner
        principal = Principal.for_person(context.session.tenant, owner) if owner else Principal.nobody(
            context.session.tenant)
    session, _ = resolve(principal, arguments["session"])
    require_write(principal, session)
    if context.session is not None and session.pk == context.session.pk:
        raise Refused("delete_session cannot delete the session it runs in.", "conflict")
    uri = session.uri  # gone with its row's id once deleted
    do_end_session(principal, session)
    return json.dumps({"deleted": uri})


def move_session(context, arguments):
    principal = context.principal
    require_write(principal, context.session)
    config = HostConfig.current(principal.tenant)
    session, _ = resolve(principal, arguments["session"])
    relationship = arguments.get("relationship")
    into = resolve(principal, arguments["into"])[0] if arguments.get("into") else None
    if relationship == "currentSession":  # the words create_session uses for "here"
        if context.session is None:
            raise Refused("currentSession needs a calling session; name one with into", "invalid")
        if into is not None:
            raise Refused('relationship "currentSession" nests it into this session; leave out into.', "invalid")
        into = context.session
    after = resolve(principal, arguments["after"])[0] if arguments.get("after") else None
    moved = actions.do_move_session(principal, session, into=into, after=after,
                                    independent=relationship == "independent",
                                    moves_enabled=config.chat_moves_enabled)
    answer = {"session": moved.uri, "openLink": open_link(moved)}
    if moved.parent_id:
        answer["parent"] = Session.objects.get(pk=moved.parent_id).uri
    return json.dumps(answer)
