"""The AHP WebSocket endpoint: JSON-RPC 2.0, one message per text frame.

The consumer parses and authorises; every state change is a `do_*` function of the owning
app, which publishes what subscribers see. Nothing a peer sends can close the connection but
an oversized frame (1009). Revoking the token, deactivating the person or removing their
membership closes it at once (4401), told through the token's and the person's groups (and
re-checked at every message); a changed role hands it the new grants the same way.
"""
import asyncio
import base64
import json
import itertools
import logging
from datetime import datetime
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction

from agents.registry import agent_infos
from grants.actions import person_group, token_group
from grants.algebra import holds
from grants.authentication import token_from_headers
from grants.models import ApiToken, Principal
from sessions_app import actions, events, quotas, state
from kernel.ids import parse_uuid
from kernel.refusals import Refused
from sessions_app.channels import ROOT, annotations_session_at, chat_at, parse, session_at
from sessions_app.events import presence as process  # this process's sockets
from sessions_app.events.presence import ensure_started
from sessions_app.models import ActionLog, Session
from tools_app import actions as tool_actions
from tools_app.config import HostConfig, wire_values
from tools_app.families.comments import actions as comment_actions
from tools_app.families.mcp_servers.server_tools import learn_client_plugins
from tools_app.families.resources import annotations_state, client_group
from tools_app.live import refresh_server_tools
from tools_app.runtime import bound_result, run_turn
from tools_app.sessions import do_end_session, do_start_session

from . import errors, frames, throttle

logger = logging.getLogger(__name__)

SUPPORTED_VERSIONS = ("1.0.0",)
SERVER_INFO = {"name": "ahp-host", "version": "0.1.0"}
MAX_FRAME_BYTES = 1024 * 1024
DEFAULT_PAGE, MAX_PAGE = 50, 200
TOKEN_REVOKED_CLOSE = 4401  # as a handshake without a live token
TOO_MANY_CONNECTIONS = 4429  # as 429: the person's connection quota is full
DATABASE_UNAVAILABLE = "Service unavailable: the host's database did not answer; try again shortly."
# Close code when the channel layer failed: reconnect and replay. 1012 (service restart) in the
# private range, as 4401 is 401: daphne lets an application send only 1000 or 3000-4999.
SERVICE_RESTART = 4012

def token_from_scope(scope):
    """The token on the upgrade: `?tkn=` in the query string or `Authorization: Bearer`."""
    query = parse_qs(scope.get("query_string", b"").decode())
    if query.get("tkn"):
        return query["tkn"][0]
    headers = dict(scope.get("headers", []))
    return token_from_headers(headers.get(b"authorization", b"").decode())


def negotiate(offered):
    """The highest offered version caret-compatible with one this host supports, or None."""
    def parsed(version):
        parts = version.split(".") if isinstance(version, str) else []
        return tuple(int(p) for p in parts) if len(parts) == 3 and all(p.isdigit() for p in parts) else None

    compatible = []
    for version in offered:
        v = parsed(version)
        if v and any(v[0] == s[0] and v >= s for s in map(parsed, SUPPORTED_VERSIONS)):
            compatible.append((v, version))
    return max(compatible)[1] if compatible else None


def encode_cursor(session):
    return base64.urlsafe_b64encode(f"{session.modified.isoformat()}|{session.id}".encode()).decode()


def decode_cursor(cursor):
    try:
        modified, _, session_id = base64.urlsafe_b64decode(cursor.encode()).decode().partition("|")
        return datetime.fromisoformat(modified), session_id
    except ValueError:
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: cursor is not one this host gave.") from None


def uuid_in(action, field):
    """The action's `field` as a UUID string; ids the host keys rows by are refused otherwise."""
    key = parse_uuid(action.get(field))
    if key is None:
        raise Refused(f"{action.get('type')} needs a {field} that is a UUID.", "invalid")
    return str(key)


class AhpConsumer(AsyncWebsocketConsumer):
    async def connect(self):
        offered = token_from_scope(self.scope)
        key = throttle.key_of(self.scope, offered)
        await throttle.HANDSHAKES.wait(key)  # only repeated failures of this address and token prefix wait
        token = await database_sync_to_async(ApiToken.authenticate)(offered)
        if token is None:
            throttle.HANDSHAKES.failed(key)
            await self.close(code=4401)
            return
        self.token_id = token.pk  # re-checked on every message: revoking it ends the connection
        self.revoked = False
        self.principal = await database_sync_to_async(token.principal)()
        self.tenant = self.principal.tenant
        self.access_groups = [token_group(token.pk)] + ([person_group(token.person_id)] if token.person_id else [])
        limit = settings.AHP_MAX_CONNECTIONS_PER_PERSON
        if process.open_by(self.tenant.pk, getattr(self.principal.person, "pk", None)) >= limit:
            await self.accept()  # accepted only to say why: a refused upgrade carries no sentence
            await self.close(code=TOO_MANY_CONNECTIONS, reason=quotas.too_many_connections(limit))
            return
        process.track(self)  # counted from here, with no wait since the count: the quota holds
        self.client_id = None
        self.connection_id = None
        self.subscriptions = set()
        self.turn_tasks = set()
        self.background = set()  # tasks that must not block this consumer's own messages
        self.server_requests = {}  # JSON-RPC id of a request this host sent -> channel awaiting the answer
        self.server_request_ids = itertools.count(1)
        # Joined before accepting, so a revocation committed from here on reaches this socket.
        try:
            for group in self.access_groups:
                await self.channel_layer.group_add(group, self.channel_name)
        except Exception as exc:
            if not process.is_layer_failure(exc):
                raise
            await self.accept()  # accepted only to say why: reconnect once the layer is back
            await self.close(code=SERVICE_RESTART)
            return
        await self.accept()
        ensure_started()

    async def __call__(self, scope, receive, send):
        """A failing channel layer (Redis restarting) ends the connection with SERVICE_RESTART,
        never a hang: the client reconnects and `reconnect` replays the log."""
        try:
            await super().__call__(scope, receive, send)
        except Exception as exc:
            if not hasattr(self, "tenant"):
                raise  # before the connection was set up: the server answers the handshake
            if not process.is_layer_failure(exc):
                await self.leave()
                raise  # the server logs it and closes with 1011
            logger.warning("The channel layer failed (%s: %s); closing this process's sockets with %s",
                           exc.__class__.__name__, exc, SERVICE_RESTART)
            await self.abandon(SERVICE_RESTART)
            await process.close_all(SERVICE_RESTART)

    async def abandon(self, code):
        """Close from this side and clean up without the channel layer, which may be down."""
        if getattr(self, "left", False):
            return
        try:
            await self.close(code=code)
        except Exception:
            logger.debug("The socket was already gone", exc_info=True)
        await self.leave(layer_up=False)

    async def disconnect(self, code):
        await self.leave()

    async def leave(self, layer_up=True):
        if getattr(self, "left", False):
            return
        self.left = True
        process.untrack(self)
        try:
            for channel in list(getattr(self, "subscriptions", ())) if layer_up else ():
                await self.channel_layer.group_discard(events.group_for(channel, self.tenant.pk), self.channel_name)
            if getattr(self, "client_id", None) and layer_up:
                await self.channel_layer.group_discard(self.own_client_group(), self.channel_name)
            for group in getattr(self, "access_groups", ()) if layer_up else ():
                await self.channel_layer.group_discard(group, self.channel_name)
        except Exception as exc:
            logger.info("Could not leave the channel layer's groups (%s); they expire there", exc)
        if getattr(self, "connection_id", None):
            try:
                await database_sync_to_async(self.close_connection)(layer_up)
            except Exception:
                # Untracked, its row goes stale and the sweep closes it by the disconnect rule.
                logger.exception("Could not close connection %s; the sweep will", self.connection_id)

    def close_connection(self, schedule=True):
        from sessions_app.tasks import release_client

        timeout = HostConfig.for_tenant(self.tenant).client_tool_call_disconnect_timeout_ms
        for pk, due in actions.do_close_connection(self.connection_id, timeout):
            # With the broker down (it is the same Redis), the sweep releases the client when due.
            if schedule:
                release_client.apply_async((pk,), eta=due)

    # Frames ------------------------------------------------------------------------------------

    def token_is_live(self):
        try:
            return ApiToken.live().filter(pk=self.token_id).exists()
        except (OperationalError, InterfaceError):
            # The database is away: whatever the message needs of it fails with DATABASE_UNAVAILABLE.
            return True

    async def receive(self, text_data=None, bytes_data=None):
        if self.revoked:
            return  # frames that were on their way when the socket was closed
        if not await database_sync_to_async(self.token_is_live)():
            await self.close_revoked()
            return
        if text_data is None:
            await self.send_error(None, errors.INVALID_REQUEST, "Invalid request: AHP messages are text frames.")
            return
        if len(text_data) > MAX_FRAME_BYTES or len(text_data.encode()) > MAX_FRAME_BYTES:
            await self.close(code=1009)
            return
        try:
            message = frames.parse(text_data)
        except frames.BadFrame as bad:
            await self.send_error(bad.request_id, bad.code, bad.message)
            return
        if self.is_response(message):
            await self.route_response(message)
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
            request_id = message.get("id") if isinstance(message, dict) else None
            await self.send_error(request_id, errors.INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 message.")
            return
        request_id = message.get("id")
        params = message.get("params", {})
        try:
            if not isinstance(params, dict):
                raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: params must be an object.")
            result = await self.dispatch_method(message["method"], params)
        # A notification that fails is answered too (with id null): bad input always gets a clear error.
        except errors.RpcError as exc:
            await self.send_error(request_id, exc.code, exc.message, exc.data)
            return
        except Refused as refusal:
            await self.send_error(request_id, refusal.answer.rpc_code, refusal.sentence)
            return
        except (OperationalError, InterfaceError) as exc:
            logger.warning("Method %s met an unavailable database: %s", message["method"], exc)
            await self.send_error(request_id, errors.INTERNAL_ERROR, DATABASE_UNAVAILABLE)
            return
        except Exception:
            logger.exception("Method %s failed", message["method"])
            await self.send_error(request_id, errors.INTERNAL_ERROR, "Internal error; the host logged it.")
            return
        if request_id is not None:
            await self.send_json({"jsonrpc": "2.0", "id": request_id, "result": result})

    async def dispatch_method(self, method, params):
        if method not in ("initialize", "reconnect", "ping") and self.client_id is None:
            raise errors.RpcError(errors.INVALID_REQUEST, f"{method} before initialize: send initialize first.")
        handler = getattr(self, f"rpc_{method.replace('/', '_')}", None) if method.isidentifier() else None
        if handler is None:
            raise errors.RpcError(errors.METHOD_NOT_FOUND, f"Method not found: {method}")
        return await handler(params)

    # Lifecycle ---------------------------------------------------------------------------------

    async def begin(self, client_id):
        if self.client_id is not None:
            raise errors.RpcError(errors.INVALID_REQUEST, "This connection is already initialized.")
        connection = await database_sync_to_async(actions.do_open_connection)(
            self.tenant, client_id, events.PROCESS, self.principal.person)
        self.client_id = client_id
        self.connection_id = connection.id
        # The host may ask this client things (resourceRead) from any process: through this group,
        # which is this person's, so another person claiming the same client id hears nothing.
        await self.channel_layer.group_add(self.own_client_group(), self.channel_name)

    def own_client_group(self):
        return client_group(self.tenant.pk, self.client_id, self.principal.person_id)

    async def rpc_initialize(self, params):
        versions = errors.require(params, "protocolVersions", list)
        client_id = errors.require(params, "clientId", str)
        initial = params.get("initialSubscriptions", [])
        if not isinstance(initial, list):
            raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: initialSubscriptions must be an array.")
        chosen = negotiate(versions)
        if chosen is None:
            raise errors.RpcError(errors.UNSUPPORTED_PROTOCOL_VERSION, "No protocol version both sides speak.",
                                  {"supportedVersions": list(SUPPORTED_VERSIONS)})
        if not client_id:
            raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: clientId must not be empty.")
        await self.begin(client_id)
        snapshots = [s for s in [await self.try_subscribe(uri) for uri in initial] if s]
        seq = await database_sync_to_async(events.current_seq)()
        return {"protocolVersion": chosen, "serverSeq": seq, "serverInfo": SERVER_INFO, "snapshots": snapshots}

    async def rpc_ping(self, params):
        return None

    async def rpc_reconnect(self, params):
        client_id = errors.require(params, "clientId", str)
        last_seen = errors.require(params, "lastSeenServerSeq", int)
        wanted = errors.require(params, "subscriptions", list)
        if self.client_id is None:
            await self.begin(client_id)
        allowed, missing = [], []
        for uri in wanted:
            (allowed if await database_sync_to_async(self.may_subscribe)(uri) else missing).append(uri)
        replay = await database_sync_to_async(self.replay_after)(last_seen, allowed)
        if replay is None:
            snapshots = [await self.subscribe_to(uri) for uri in allowed]
            return {"type": "snapshot", "snapshots": snapshots}
        for uri in allowed:
            await self.join(uri)
        return {"type": "replay", "actions": replay, "missing": [u for u in missing if isinstance(u, str)]}

    def replay_after(self, last_seen, channels):
        """Logged envelopes after `last_seen` on `channels`, or None when the log no longer reaches back."""
        oldest = ActionLog.objects.order_by("seq").values_list("seq", flat=True).first()
        if oldest is not None and oldest > last_seen + 1:
            return None
        if oldest is None and last_seen < events.current_seq():
            return None
        rows = ActionLog.objects.for_tenant(self.tenant).filter(seq__gt=last_seen, channel__in=channels).order_by("seq")
        return [row.envelope for row in rows]

    # Subscriptions -----------------------------------------------------------------------------

    def may_subscribe(self, uri):
        kind, _ = parse(uri)
        if kind == "root":
            return True
        if kind == "session":
            session = session_at(uri, self.tenant)
            return session is not None and self.principal.may("session:read", session)
        if kind == "chat":
            chat = chat_at(uri, self.tenant)
            return chat is not None and self.principal.may("chat:turns", chat.session)
        if kind == "annotations":
            session = annotations_session_at(uri, self.tenant)
            return session is not None and self.principal.may("session:read", session)
        return False

    def read_snapshot(self, uri):
        kind, _ = parse(uri)
        if kind == "session":
            refresh_server_tools([session_at(uri, self.tenant)])
        with transaction.atomic():
            from_seq = events.snapshot_lock()
            if kind == "root":
                snapshot = state.root_state(self.principal, agent_infos(), wire_values(HostConfig.for_tenant(self.tenant)))
            elif kind == "session":
                snapshot = state.session_state(session_at(uri, self.tenant))
            elif kind == "annotations":
                snapshot = annotations_state(annotations_session_at(uri, self.tenant))
            else:
                snapshot = state.chat_state(chat_at(uri, self.tenant))
        return {"resource": uri, "state": snapshot, "fromSeq": from_seq}

    async def join(self, uri):
        if uri not in self.subscriptions:
            await self.channel_layer.group_add(events.group_for(uri, self.tenant.pk), self.channel_name)
            self.subscriptions.add(uri)
            await database_sync_to_async(self.save_subscriptions)()

    def save_subscriptions(self):
        actions.do_set_subscriptions(self.connection_id, self.subscriptions)

    async def subscribe_to(self, uri):
        # Join first, so nothing published between the snapshot and the join is missed.
        await self.join(uri)
        return await database_sync_to_async(self.read_snapshot)(uri)

    async def try_subscribe(self, uri):
        if isinstance(uri, str) and await database_sync_to_async(self.may_subscribe)(uri):
            return await self.subscribe_to(uri)
        return None

    async def rpc_subscribe(self, params):
        uri = errors.require(params, "channel", str)
        if parse(uri)[0] is None:
            raise errors.RpcError(errors.NOT_FOUND, f"No channel {uri} here.")
        if not await database_sync_to_async(self.may_subscribe)(uri):
            raise errors.RpcError(errors.NOT_FOUND, f"No channel {uri} here.")
        return {"snapshot": await self.subscribe_to(uri)}

    async def rpc_unsubscribe(self, params):
        uri = errors.require(params, "channel", str)
        if uri in self.subscriptions:
            self.subscriptions.discard(uri)
            await self.channel_layer.group_discard(events.group_for(uri, self.tenant.pk), self.channel_name)
            await database_sync_to_async(self.save_subscriptions)()
            if parse(uri)[0] == "session":
                await database_sync_to_async(self.leave_session)(uri)
        return None

    def leave_session(self, uri):
        """A client that unsubscribes from a session leaves it at once: its owed calls fail."""
        from sessions_app.models import ActiveClient

        session = session_at(uri, self.tenant)
        row = session and ActiveClient.objects.filter(session=session, client_id=self.client_id,
                                                      owner_id=self.principal.person_id).first()
        if row:
            actions.do_release_client(row.pk)

    # Commands ----------------------------------------------------------------------------------

    def session_or_not_found(self, uri, grant="session:read"):
        session = session_at(uri, self.tenant) if isinstance(uri, str) else None
        if session is None or not self.principal.may("session:read", session):
            raise errors.RpcError(errors.NOT_FOUND, f"No session {uri} here.")
        return session

    def chat_or_not_found(self, uri):
        chat = chat_at(uri, self.tenant) if isinstance(uri, str) else None
        if chat is None or not self.principal.may("session:read", chat.session):
            raise errors.RpcError(errors.NOT_FOUND, f"No chat {uri} here.")
        return chat

    async def rpc_listSessions(self, params):
        limit = params.get("limit", DEFAULT_PAGE)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: limit must be a positive number.")
        cursor = params.get("cursor")
        if cursor is not None and not isinstance(cursor, str):
            raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: cursor must be a string.")
        return await database_sync_to_async(self.list_sessions)(min(limit, MAX_PAGE), cursor)

    def list_sessions(self, limit, cursor):
        from django.db.models import Q

        sessions = Session.objects.visible_to(self.principal).order_by("-modified", "-id")
        if cursor:
            modified, session_id = decode_cursor(cursor)
            try:
                sessions = sessions.filter(Q(modified__lt=modified) | Q(modified=modified, id__lt=session_id))
            except Exception:
                raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: cursor is not one this host gave.") from None
        page = list(sessions[: limit + 1])
        result = {"items": [s.summary() for s in page[:limit]]}
        if len(page) > limit:
            result["nextCursor"] = encode_cursor(page[limit - 1])
        return result

    async def rpc_createSession(self, params):
        uri = errors.require(params, "channel", str)
        kind, session_id = parse(uri)
        if kind != "session":
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

        def create():
            with transaction.atomic():
                session = do_start_session(self.principal, session_id, provider, folders, config)
                if active_client is not None:
                    actions.do_set_active_client(self.principal, session, self.client_id, active_client)
            refresh_server_tools([session])

        try:
            await database_sync_to_async(create)()
        except Refused as refusal:
            if refusal.kind == "exists":
                raise errors.RpcError(errors.SESSION_ALREADY_EXISTS, refusal.sentence) from None
            raise
        return None

    async def rpc_disposeSession(self, params):
        uri = errors.require(params, "channel", str)

        def dispose():
            do_end_session(self.principal, self.session_or_not_found(uri))

        await database_sync_to_async(dispose)()
        return None

    async def rpc_createChat(self, params):
        session_uri = errors.require(params, "channel", str)
        chat_uri = errors.require(params, "chat", str)
        kind, chat_id = parse(chat_uri)
        if kind != "chat":
            raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: chat must be ahp-chat:/<uuid>.")
        initial = params.get("initialMessage")
        if initial is not None and not (isinstance(initial, dict) and isinstance(initial.get("text"), str)):
            raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: initialMessage.text must be a string.")
        source = params.get("source")

        def create():
            session = self.session_or_not_found(session_uri)
            origin = None
            if isinstance(source, dict) and source.get("kind") in ("fork", "sideChat"):
                origin_chat = chat_at(source.get("chat"), self.tenant)
                if origin_chat is None or origin_chat.session_id != session.id:
                    raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: source.chat is not a chat of this session.")
                origin = {"kind": source["kind"], "chat_id": origin_chat.id, "turn_id": str(source.get("turnId", ""))}
            with transaction.atomic():
                chat = actions.do_create_chat(self.principal, session, chat_id, origin=origin)
                if initial is None:
                    return None
                import uuid

                return actions.do_start_turn(self.principal, chat, uuid.uuid4(), initial["text"], self.client_id)

        turn = await database_sync_to_async(create)()
        if turn is not None:
            self.launch_turn(turn.id)
        return None

    async def rpc_disposeChat(self, params):
        uri = errors.require(params, "channel", str)

        def dispose():
            actions.do_dispose_chat(self.principal, self.chat_or_not_found(uri))

        await database_sync_to_async(dispose)()
        return None

    # Actions -----------------------------------------------------------------------------------

    async def rpc_dispatchAction(self, params):
        channel = errors.require(params, "channel", str)
        client_seq = errors.require(params, "clientSeq", int)
        action = errors.require(params, "action", dict)
        action_type = action.get("type")
        origin = {"clientId": self.client_id, "clientSeq": client_seq}
        handler = ACTION_HANDLERS.get(action_type) if isinstance(action_type, str) else None
        try:
            if handler is None:
                raise Refused(f"This host does not accept {action_type!r} from clients.", "invalid")
            outcome = await database_sync_to_async(handler)(self, channel, action, origin)
        except (Refused, errors.RpcError) as refusal:
            reason = refusal.sentence if isinstance(refusal, Refused) else refusal.message
            await self.reject(channel, action, origin, reason)
            return None
        if action_type == "chat/turnStarted":
            self.launch_turn(outcome.id)
        elif action_type == "session/activeClientSet" and outcome.customizations:
            self.learn_client_plugins(outcome)
        return None

    def learn_client_plugins(self, active_client):
        """The client's plugins may bring http MCP servers; their `.mcp.json` is on the client's
        machine, so the host asks the client. A task: this consumer must stay free to carry
        the question and its answer."""
        task = asyncio.get_running_loop().create_task(learn_client_plugins(
            self.tenant.pk, active_client.session_id, active_client.client_id, active_client.owner_id,
            active_client.customizations))
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    async def reject(self, channel, action, origin, reason):
        seq = await database_sync_to_async(events.current_seq)()
        await self.send_notification("action", events.envelope(channel, action, seq, origin, reason))

    def target_session(self, channel):
        session = session_at(channel, self.tenant)
        if session is None or not self.principal.may("session:read", session):
            raise Refused(f"No session {channel} here.", "not_found")
        return session

    def target_chat(self, channel):
        chat = chat_at(channel, self.tenant)
        if chat is None or not self.principal.may("session:read", chat.session):
            raise Refused(f"No chat {channel} here.", "not_found")
        return chat

    def act_active_client_set(self, channel, action, origin):
        session = self.target_session(channel)
        return actions.do_set_active_client(self.principal, session, self.client_id, action.get("activeClient"), origin)

    def act_active_client_removed(self, channel, action, origin):
        actions.do_remove_active_client(self.principal, self.target_session(channel), self.client_id,
                                        action.get("clientId"), origin)

    def act_title_changed(self, channel, action, origin):
        actions.do_set_title(self.principal, self.target_session(channel), action.get("title"), origin)

    def act_archived_changed(self, channel, action, origin):
        actions.do_set_flag(self.principal, self.target_session(channel), "isArchived", action.get("isArchived"), origin)

    def act_read_changed(self, channel, action, origin):
        actions.do_set_flag(self.principal, self.target_session(channel), "isRead", action.get("isRead"), origin)

    def act_turn_started(self, channel, action, origin):
        chat = self.target_chat(channel)
        message = action.get("message")
        if not isinstance(message, dict) or not isinstance(message.get("text"), str):
            raise Refused("chat/turnStarted needs message.text.", "invalid")
        if (message.get("origin") or {}).get("kind", "user") != "user":
            raise Refused("Clients may send only user messages.", "invalid")
        turn_id = parse_uuid(action.get("turnId"))
        if turn_id is None:
            raise Refused("chat/turnStarted needs a turnId that is a UUID.", "invalid")
        return actions.do_start_turn(self.principal, chat, turn_id, message["text"], self.client_id, origin)

    def act_tool_call_complete(self, channel, action, origin):
        chat = self.target_chat(channel)
        call_id, result, full_text = uuid_in(action, "toolCallId"), action.get("result"), None
        content = result.get("content") if isinstance(result, dict) else None
        if isinstance(content, list) and all(isinstance(c, dict) and isinstance(c.get("text", ""), str) for c in content):
            result, full_text = bound_result(result, call_id)  # a client's text is cut as a host tool's is
        # Not one transaction with the completion: a late result is refused after the timeout
        # that beat it is committed.
        actions.do_client_complete_tool_call(self.principal, self.client_id, chat, uuid_in(action, "turnId"),
                                             call_id, result, origin)
        if full_text is not None:  # kept for ahp_resource, as a host tool's whole output is
            tool_actions.do_keep_full_output(call_id, full_text)

    def act_tool_call_confirmed(self, channel, action, origin):
        chat = self.target_chat(channel)
        # Only a host tool that asked the person (viewUnreviewedComments) waits for an answer.
        comment_actions.do_answer_question(self.principal, chat, uuid_in(action, "turnId"),
                                             uuid_in(action, "toolCallId"), action.get("approved"), origin)

    def act_config_changed(self, channel, action, origin):
        if channel != ROOT:
            raise Refused("root/configChanged belongs on ahp-root://.", "invalid")
        tool_actions.do_change_host_config(self.principal, action.get("config"), bool(action.get("replace")), origin)

    # Annotations: a client's writes take the same writers as the comment tools.

    def target_annotations(self, channel):
        session = annotations_session_at(channel, self.tenant)
        if session is None or not self.principal.may("session:read", session):
            raise Refused(f"No annotations channel {channel} here.", "not_found")
        return session

    def act_annotation_set(self, channel, action, origin):
        comment_actions.do_set_annotation(self.principal, self.target_annotations(channel), action.get("annotation"),
                                            origin)

    def act_annotation_updated(self, channel, action, origin):
        changes = {k: action[k] for k in ("resolved", "range", "turnId", "resource") if k in action}
        comment_actions.do_update_annotation(self.principal, self.target_annotations(channel),
                                               str(action.get("annotationId")), changes, origin)

    def act_annotation_removed(self, channel, action, origin):
        comment_actions.do_remove_annotation(self.principal, self.target_annotations(channel),
                                               str(action.get("annotationId")), origin)

    def act_annotation_entry_set(self, channel, action, origin):
        comment_actions.do_set_annotation_entry(self.principal, self.target_annotations(channel),
                                                  str(action.get("annotationId")), action.get("entry"), origin)

    def act_annotation_entry_removed(self, channel, action, origin):
        comment_actions.do_remove_annotation_entry(self.principal, self.target_annotations(channel),
                                                     str(action.get("annotationId")), str(action.get("entryId")),
                                                     origin)

    def launch_turn(self, turn_id):
        task = asyncio.get_running_loop().create_task(run_turn(turn_id))
        self.turn_tasks.add(task)
        task.add_done_callback(self.turn_tasks.discard)

    # Channel layer messages --------------------------------------------------------------------

    async def ahp_action(self, message):
        envelope = message["envelope"]
        if envelope["channel"] in self.subscriptions:
            await self.send_notification("action", envelope)

    async def ahp_notification(self, message):
        params = message["params"]
        session_uri = params.get("session") or params.get("summary", {}).get("resource")
        if holds(self.principal.grants, "session:read") or (
            session_uri and await database_sync_to_async(self.may_subscribe)(session_uri)
        ):
            await self.send_notification(message["method"], params)

    async def ahp_access_ended(self, message):
        """The token was revoked, or the person deactivated or removed from this tenant."""
        if message.get("tenant_id") in (None, self.tenant.pk):
            await self.close_revoked()

    async def close_revoked(self):
        if self.revoked:
            return  # closing already: a second close on a closed socket would fail
        self.revoked = True
        await self.close(code=TOKEN_REVOKED_CLOSE, reason="The connection's token was revoked.")

    async def ahp_grants_changed(self, message):
        """The person's role (or its grants) changed: the next message acts with the new grants,
        and channels they may no longer read are left at once."""
        if message.get("tenant_id") != self.tenant.pk:
            return
        self.principal = Principal(self.tenant, self.principal.person, message["grants"], self.token_id)
        unreadable = await database_sync_to_async(
            lambda: [uri for uri in self.subscriptions if not self.may_subscribe(uri)])()
        for uri in unreadable:
            self.subscriptions.discard(uri)
            await self.channel_layer.group_discard(events.group_for(uri, self.tenant.pk), self.channel_name)
        if unreadable:
            await database_sync_to_async(self.save_subscriptions)()

    # Requests this host sends the client ---------------------------------------------------------

    @staticmethod
    def is_response(message):
        return (isinstance(message, dict) and "method" not in message and isinstance(message.get("id"), int)
                and ("result" in message or "error" in message))

    async def ahp_server_request(self, message):
        """A tool (in any process) asks this client something; its answer goes to `reply_to`."""
        request_id = next(self.server_request_ids)
        self.server_requests[request_id] = message["reply_to"]
        await self.send_json({"jsonrpc": "2.0", "id": request_id, "method": message["method"],
                              "params": message["params"]})

    async def route_response(self, message):
        reply_to = self.server_requests.pop(message["id"], None)
        if reply_to is None:
            return  # an answer nobody waits for any more (or to nothing we asked): dropped
        answer = {"type": "ahp.server_reply"}
        answer.update({"error": message["error"]} if "error" in message else {"result": message["result"]})
        await self.channel_layer.send(reply_to, answer)

    # Sending -----------------------------------------------------------------------------------

    async def send_json(self, payload):
        try:
            await self.send(text_data=json.dumps(payload))
        except OSError:
            # The client vanished while news for it was on its way (servers raise
            # ClientDisconnected); its websocket.disconnect follows and cleans up.
            logger.debug("Dropped a frame for a client that already left")

    async def send_notification(self, method, params):
        await self.send_json({"jsonrpc": "2.0", "method": method, "params": params})

    async def send_error(self, request_id, code, message, data=None):
        error = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        await self.send_json({"jsonrpc": "2.0", "id": request_id, "error": error})


ACTION_HANDLERS = {
    "session/activeClientSet": AhpConsumer.act_active_client_set,
    "session/activeClientRemoved": AhpConsumer.act_active_client_removed,
    "session/titleChanged": AhpConsumer.act_title_changed,
    "session/isArchivedChanged": AhpConsumer.act_archived_changed,
    "session/isReadChanged": AhpConsumer.act_read_changed,
    "chat/turnStarted": AhpConsumer.act_turn_started,
    "chat/toolCallComplete": AhpConsumer.act_tool_call_complete,
    "chat/toolCallConfirmed": AhpConsumer.act_tool_call_confirmed,
    "root/configChanged": AhpConsumer.act_config_changed,
    "annotations/set": AhpConsumer.act_annotation_set,
    "annotations/updated": AhpConsumer.act_annotation_updated,
    "annotations/removed": AhpConsumer.act_annotation_removed,
    "annotations/entrySet": AhpConsumer.act_annotation_entry_set,
    "annotations/entryRemoved": AhpConsumer.act_annotation_entry_removed,
}
