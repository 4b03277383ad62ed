"""AHP's JSON-RPC methods, in one table: each handler takes the connection and the request's
params and returns the result; a refusal is an RpcError or a Refused the transport answers."""
import base64
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.db.models import Q

from agents.registry import get_provider
from grants.models import ApiToken, Principal
from kernel.ids import parse_uuid
from kernel.orm import database_sync_to_async
from kernel.refusals import Refused
from sessions_app import actions, events, state
from sessions_app.channels import chat_at, parse, session_at
from sessions_app.models import Chat, Session, Turn
from tools_app.config import HostConfig
from tools_app.live import refresh_server_tools
from tools_app.prewarm import prewarm_session
from tools_app.sessions import do_end_session, do_fork_session, do_start_session

from . import client_actions, completions, errors, homes, resources, session_config, subscriptions, terminals, watches

if TYPE_CHECKING:
    from .consumer import AhpConsumer

Params = dict[str, Any]  # a request's params, or a result

SUPPORTED_VERSIONS = ("1.1.0", "1.0.0")  # newest first; docs/wire.md says what 1.1.0 adds
SERVER_INFO = {"name": "ahp-host", "version": "0.1.0"}
DEFAULT_PAGE, MAX_PAGE = 50, 200
NO_COMMON_VERSION = "No protocol version both sides speak."
NO_COMMON_VERSION_CLOSE = 1000  # after -32005 the protocol closes the connection: a normal closure, nothing to retry


def negotiate(offered: list[Any]) -> str | None:
    """The highest offered version caret-compatible with one this host supports, or None."""
    def parsed(version: Any) -> tuple[int, ...] | None:
        parts = version.split(".") if isinstance(version, str) else []
        return tuple(int(p) for p in parts) if len(parts) == 3 and all(p.isdigit() for p in parts) else None

    supported = [v for v in map(parsed, SUPPORTED_VERSIONS) if v is not None]
    compatible = []
    for version in offered:
        v = parsed(version)
        if v and any(v[0] == s[0] and v >= s for s in supported):
            compatible.append((v, version))
    return max(compatible)[1] if compatible else None


def encode_cursor(session: Session) -> str:
    return base64.urlsafe_b64encode(f"{session.modified.isoformat()}|{session.id}".encode()).decode()


def decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        modified, _, session_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return datetime.fromisoformat(modified), session_id
    except ValueError:
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: cursor is not one this host gave.") from None


def session_or_not_found(consumer: homes.Asker, uri: Any) -> Session:
    session = session_at(uri, consumer.tenant) if isinstance(uri, str) else None
    if session is None or not consumer.principal.may("session:read", session):
        raise errors.RpcError(errors.NOT_FOUND, f"No session {uri} here.")
    return session


def chat_or_not_found(consumer: "AhpConsumer", uri: Any) -> Chat:
    chat = chat_at(uri, consumer.tenant) if isinstance(uri, str) else None
    if chat is None or not consumer.principal.may("session:read", chat.session):
        raise errors.RpcError(errors.NOT_FOUND, f"No chat {uri} here.")
    return chat


# Lifecycle -------------------------------------------------------------------------------------

async def initialize(consumer: "AhpConsumer", params: Params) -> Params:
    if consumer.client_id is not None:  # negotiated already: a second offer ends nothing
        raise errors.RpcError(errors.INVALID_REQUEST, "This connection is already initialized.")
    versions = errors.require(params, "protocolVersions", list)
    client_id = errors.require(params, "clientId", str)
    initial = params.get("initialSubscriptions", [])
    if not isinstance(initial, list):
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: initialSubscriptions must be an array.")
    chosen = negotiate(versions)
    if chosen is None:
        raise errors.RpcError(errors.UNSUPPORTED_PROTOCOL_VERSION, NO_COMMON_VERSION,
                              {"supportedVersions": list(SUPPORTED_VERSIONS)}, closes=NO_COMMON_VERSION_CLOSE)
    if not client_id:
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: clientId must not be empty.")
    seq = await consumer.begin(client_id)
    snapshots = [s for s in [await subscriptions.try_subscribe(consumer, uri) for uri in initial] if s]
    if snapshots:
        # Read again after the snapshots: a client replays from serverSeq on reconnecting, and an
        # action already in a snapshot must not be applied to it twice.
        seq = await database_sync_to_async(events.current_seq)(consumer.tenant.pk)
    return {"protocolVersion": chosen, "serverSeq": seq, "serverInfo": SERVER_INFO, "snapshots": snapshots}


def protected_resource(resource: str) -> Params:
    """The ProtectedResourceMetadata (RFC 9728, as AuthRequiredErrorData carries it) of what
    `authenticate` named: this host's API tokens, given on the upgrade as a bearer header or
    `?tkn=`, or pushed with `authenticate`."""
    return {"resource": resource, "resource_name": f"{SERVER_INFO['name']} API token",
            "bearer_methods_supported": ["header", "query"], "required": True}


async def authenticate(consumer: "AhpConsumer", params: Params) -> Params:
    """A fresh token pushed on an open connection (one about to lapse replaced): from here on the
    connection lives as long as that token does. A connection keeps the person it opened as."""
    errors.require(params, "resource", str)
    offered = errors.require(params, "token", str)
    token = await database_sync_to_async(ApiToken.authenticate)(offered)
    if token is None or token.tenant_id != consumer.tenant.pk:
        raise errors.RpcError(errors.AUTH_REQUIRED, "That token does not authenticate with this host.",
                              {"resources": [protected_resource(params["resource"])]})
    if token.person_id != consumer.principal.person_id:
        raise errors.RpcError(errors.PERMISSION_DENIED,
                              "A connection acts as the person it opened as; open another to act as someone else.")
    await consumer.adopt_token(token)
    return {}


async def ping(consumer: "AhpConsumer", params: Params) -> None:
    return None


async def reconnect(consumer: "AhpConsumer", params: Params) -> Params:
    client_id = errors.require(params, "clientId", str)
    last_seen = errors.require(params, "lastSeenServerSeq", int)
    wanted = errors.require(params, "subscriptions", list)
    if consumer.client_id is None:
        await consumer.begin(client_id)
    return await subscriptions.resume(consumer, last_seen, wanted)


# Subscriptions ---------------------------------------------------------------------------------

async def subscribe(consumer: "AhpConsumer", params: Params) -> Params:
    uri = errors.require(params, "channel", str)
    if uri.startswith(watches.PREFIX):
        return {"snapshot": await watches.subscribe(consumer, uri)}
    if parse(uri)[0] is None:
        raise errors.RpcError(errors.NOT_FOUND, f"No channel {uri} here.")
    if not await database_sync_to_async(subscriptions.may_subscribe)(consumer, uri):
        raise errors.RpcError(errors.NOT_FOUND, f"No channel {uri} here.")
    return {"snapshot": await subscriptions.subscribe_to(consumer, uri)}


async def unsubscribe(consumer: "AhpConsumer", params: Params) -> None:
    uri = errors.require(params, "channel", str)
    await subscriptions.unsubscribe(consumer, uri)
    watches.release(consumer, uri)
    return None


# Commands --------------------------------------------------------------------------------------

async def list_sessions(consumer: "AhpConsumer", params: Params) -> Params:
    limit = params.get("limit", DEFAULT_PAGE)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: limit must be a positive number.")
    cursor = params.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: cursor must be a string.")
    return await database_sync_to_async(session_page)(consumer.principal, min(limit, MAX_PAGE), cursor)


def session_page(principal: Principal, limit: int, cursor: str | None) -> Params:
    sessions = Session.objects.listed().visible_to(principal).order_by("-modified", "-id")
    if cursor:
        modified, session_id = decode_cursor(cursor)
        try:
            sessions = sessions.filter(Q(modified__lt=modified) | Q(modified=modified, id__lt=session_id))
        except Exception:
            raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: cursor is not one this host gave.") from None
    page = list(sessions[: limit + 1])
    catalogues = state.chat_catalogues(page[:limit])  # SessionSummary.chats and defaultChat
    result: Params = {"items": [{**s.summary(), **catalogues[s.pk]} for s in page[:limit]]}
    if len(page) > limit:
        result["nextCursor"] = encode_cursor(page[limit - 1])
    return result


def selected_model(model: Any) -> str | None:
    """createSession's `model` (a ModelSelection {id}; a bare id is taken too) as its id, or None."""
    model_id = model.get("id") if isinstance(model, dict) else model
    if model is not None and not (isinstance(model_id, str) and 0 < len(model_id) <= 200):
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: model must be a ModelSelection {id}.")
    return model_id


def selected_agent(agent: Any) -> str | None:
    """createSession's `agent` (an AgentSelection {uri}: the name of one of the tenant's agent
    definitions, the only custom agents this host has) as that name, or None."""
    uri = agent.get("uri") if isinstance(agent, dict) else None
    if agent is not None and not (isinstance(uri, str) and uri):
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: agent must be an AgentSelection {uri}.")
    return uri


async def create_session(consumer: "AhpConsumer", params: Params) -> None:
    uri = errors.require(params, "channel", str)
    kind, session_id = parse(uri)
    if kind != "session" or session_id is None:
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: channel must be ahp-session:/<uuid>.")
    provider = params.get("provider", "echo")
    folders = params.get("workingDirectories", [])
    config = params.get("config", {})
    if not isinstance(provider, str):
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: provider must be a string.")
    if not isinstance(folders, list) or not all(isinstance(f, str) for f in folders):
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: workingDirectories must be an array of URIs.")
    if not isinstance(config, dict):
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: config must be an object.")
    active_client = params.get("activeClient")
    model, agent = selected_model(params.get("model")), selected_agent(params.get("agent"))
    fork = params.get("fork")
    if fork is not None and not (isinstance(fork, dict) and isinstance(fork.get("session"), str)
                                 and isinstance(fork.get("turnId"), str)):
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: fork must be a SessionForkSource {session, turnId}.")

    def create() -> tuple[str, uuid.UUID | None]:
        with transaction.atomic():
            if fork is None:
                session = do_start_session(consumer.principal, session_id, provider, folders, config, model, agent)
            else:  # the source's agent and folders: the fork's provider and workingDirectories are ignored
                session = do_fork_session(consumer.principal, session_id, session_or_not_found(consumer, fork["session"]),
                                          fork["turnId"], config, model, agent)
            if active_client is not None:
                actions.do_set_active_client(consumer.principal, session, consumer.known_client_id, active_client)
            chat_id = session.chats.filter(is_default=True).values_list("id", flat=True).first()
        homes.make_home_here(session.id)
        refresh_server_tools([session])
        return session.provider, chat_id

    try:
        session_provider, chat_id = await database_sync_to_async(create)()
    except Refused as refusal:
        if refusal.kind == "exists":
            raise errors.RpcError(errors.SESSION_ALREADY_EXISTS, refusal.sentence) from None
        raise
    if chat_id is not None and hasattr(get_provider(session_provider), "prewarm"):  # it keeps a harness warm
        consumer.in_background(prewarm_session(session_id, session_provider, chat_id))
    return None


async def dispose_session(consumer: homes.Asker, params: Params) -> None:
    uri = errors.require(params, "channel", str)

    def dispose() -> None:
        do_end_session(consumer.principal, session_or_not_found(consumer, uri))

    await database_sync_to_async(dispose)()
    return None


async def create_chat(consumer: "AhpConsumer", params: Params) -> None:
    session_uri = errors.require(params, "channel", str)
    chat_uri = errors.require(params, "chat", str)
    kind, chat_id = parse(chat_uri)
    if kind != "chat" or chat_id is None:
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: chat must be ahp-chat:/<uuid>.")
    initial = params.get("initialMessage")
    if initial is not None and not (isinstance(initial, dict) and isinstance(initial.get("text"), str)):
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: initialMessage.text must be a string.")
    source = params.get("source")
    principal = consumer.principal

    def create() -> Turn | None:
        session = session_or_not_found(consumer, session_uri)
        origin: actions.ChatOrigin | None = None
        if isinstance(source, dict) and source.get("kind") in ("fork", "sideChat"):
            origin_chat = chat_at(source.get("chat"), consumer.tenant)
            if origin_chat is None or origin_chat.session_id != session.id:
                raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: source.chat is not a chat of this session.")
            origin = {"kind": source["kind"], "chat_id": origin_chat.id, "turn_id": str(source.get("turnId", ""))}
        with transaction.atomic():
            chat = actions.do_create_chat(principal, session, chat_id, source=origin)
            if initial is None:
                return None
            return actions.do_start_turn(principal, chat, uuid.uuid4(), initial["text"], consumer.known_client_id)

    turn = await database_sync_to_async(create)()
    if turn is not None:
        consumer.launch_turn(turn.id)
    return None


async def dispose_chat(consumer: "AhpConsumer", params: Params) -> None:
    uri = errors.require(params, "channel", str)

    def dispose() -> None:
        actions.do_dispose_chat(consumer.principal, chat_or_not_found(consumer, uri))

    await database_sync_to_async(dispose)()
    return None


MOVE_TO_NEW_SESSION = ("moveChat to a new session is not offered here: create the session, then move the chat to "
                       "its default chat.")


async def move_chat(consumer: "AhpConsumer", params: Params) -> Params:
    """moveChat {channel (the chat), destination: {kind: "chat", chat}, requestId}: the chat moves
    into the destination chat's session (docs/wire.md says what of the types' move is kept)."""
    uri = errors.require(params, "channel", str)
    destination = errors.require(params, "destination", dict)
    request_id = errors.require(params, "requestId", str)
    if not 0 < len(request_id) <= 200:
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: requestId must be 1 to 200 characters.")
    if destination.get("kind") == "newSession":
        raise errors.RpcError(errors.INVALID_PARAMS, MOVE_TO_NEW_SESSION)
    if destination.get("kind") != "chat" or not isinstance(destination.get("chat"), str):
        raise errors.RpcError(errors.INVALID_PARAMS,
                              'Invalid params: destination must be {kind: "chat", chat} or {kind: "newSession"}.')

    def move() -> Params:
        chat = chat_or_not_found(consumer, uri)
        return actions.do_move_chat(consumer.principal, chat, chat_or_not_found(consumer, destination["chat"]),
                                    request_id, HostConfig.for_tenant(consumer.tenant).chat_moves_enabled)

    return await database_sync_to_async(move)()


async def fetch_turns(consumer: "AhpConsumer", params: Params) -> Params:
    """Older turns of a chat (a session's channel means its default chat), `before` a turn id."""
    uri = errors.require(params, "channel", str)
    limit = params.get("limit", DEFAULT_PAGE)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: limit must be a positive number.")
    before = params.get("before")
    if before is not None and not isinstance(before, str):
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: before must be a string.")

    def page() -> Params:
        chat = readable_chat(consumer, uri)
        turn = None
        if before is not None:
            turn_id = parse_uuid(before)
            turn = turn_id and Turn.objects.filter(chat=chat, id=turn_id).first()
            if not turn:
                raise errors.RpcError(errors.INVALID_PARAMS, f"Invalid params: before is not a turn of {chat.uri}.")
        return state.turn_page(chat, turn, min(limit, MAX_PAGE))

    return await database_sync_to_async(page)()


def readable_chat(consumer: "AhpConsumer", uri: Any) -> Chat:
    """The chat at `uri`, or the default chat of the session there, if the caller may read its turns."""
    kind, _ = parse(uri) if isinstance(uri, str) else (None, None)
    if kind == "session":
        session = session_at(uri, consumer.tenant)
        chat = session.chats.filter(is_default=True).first() if session is not None else None
    else:
        chat = chat_at(uri, consumer.tenant) if kind == "chat" else None
    if chat is None or not consumer.principal.may("chat:turns", chat.session):
        raise errors.RpcError(errors.NOT_FOUND, f"No chat {uri} here.")
    return chat


async def dispatch_action(consumer: homes.Asker, params: Params) -> None:
    """A client's action: applied, or answered with the same envelope carrying rejectionReason."""
    channel = errors.require(params, "channel", str)
    client_seq = errors.require(params, "clientSeq", int)
    action = errors.require(params, "action", dict)
    origin = {"clientId": consumer.known_client_id, "clientSeq": client_seq}
    try:
        entry, outcome = await database_sync_to_async(client_actions.apply)(
            consumer.principal, consumer.known_client_id, channel, action, origin)
    except client_actions.NoSuchChannel:
        return None
    except (Refused, errors.RpcError) as refusal:
        reason = refusal.sentence if isinstance(refusal, Refused) else refusal.message
        await consumer.send_notification("action", events.envelope(channel, action, events.REJECTED_SEQ, origin,
                                                                   reason))
        return None
    if entry.then is not None:
        entry.then(consumer, outcome)
    return None


# The methods that touch a session's files or processes (homes.SESSION_OF): run at its home, for
# the connection there or a homes.Visitor.
AT_HOME: dict[str, homes.Handler] = {
    "disposeSession": dispose_session,
    "dispatchAction": dispatch_action,
    **resources.AT_HOME,
    **terminals.COMMANDS,
}
METHODS: dict[str, Callable[["AhpConsumer", Params], Awaitable[Any]]] = {
    "initialize": initialize,
    "ping": ping,
    "authenticate": authenticate,
    "reconnect": reconnect,
    "subscribe": subscribe,
    "unsubscribe": unsubscribe,
    "listSessions": list_sessions,
    "createSession": create_session,
    "createChat": create_chat,
    "disposeChat": dispose_chat,
    "moveChat": move_chat,
    "fetchTurns": fetch_turns,
    "resolveSessionConfig": session_config.resolve_session_config,
    "sessionConfigCompletions": session_config.session_config_completions,
    **completions.COMMANDS,
    **resources.COMMANDS,
    **watches.COMMANDS,
    **AT_HOME,
}
BEFORE_INITIALIZE = {"initialize", "reconnect", "ping"}


async def call(consumer: "AhpConsumer", method: str, params: Params) -> Any:
    """The result of `method` on this connection."""
    if method not in BEFORE_INITIALIZE and consumer.client_id is None:
        raise errors.RpcError(errors.INVALID_REQUEST, f"{method} before initialize: send initialize first.")
    handler = METHODS.get(method)
    if handler is None:
        raise errors.RpcError(errors.METHOD_NOT_FOUND, f"Method not found: {method}")
    return await homes.at_home(consumer, method, params, handler)
