"""The AHP WebSocket endpoint's transport: JSON-RPC 2.0, one message per text frame.

The consumer connects, parses frames, answers and closes; `methods` holds what each method
does, `client_actions` what each dispatchable action does, `subscriptions` what a connection
reads, `access` who it acts as and for how long. Every state change is a `do_*` function of the
owning app, which publishes what subscribers see. Nothing a peer sends can close the connection
but an oversized frame (1009) and an `initialize` offering no version the host speaks (answered
-32005, then closed with 1000, as the protocol's negotiation asks).
"""
import asyncio
import itertools
import json
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping
from typing import Any
from uuid import UUID

from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from django.conf import settings
from django.db import InterfaceError, OperationalError
from django.utils import timezone

from grants import liveness
from grants.actions import person_group, token_group
from grants.algebra import holds
from kernel.orm import database_sync_to_async
from kernel.refusals import Refused
from sessions_app import events, quotas
from sessions_app.events import sockets  # this process's sockets
from sessions_app.events.catch_up import SentOfChannel
from sessions_app.events.heartbeat import ensure_started
from sessions_app.models import ActiveClient, Turn
from tools_app.families.mcp_servers.server_tools import learn_client_plugins
from tools_app.runtime.turns import interrupt_turn, run_turn

from . import errors, frames, homes, methods, socket_rows, subscriptions, throttle, watches
from .access import AccessConsumer, authenticated, token_from_scope
from .watches import Watch

logger = logging.getLogger(__name__)

Message = dict[str, Any]  # a JSON-RPC frame, a channel layer message or an ASGI event

MAX_FRAME_BYTES = 1024 * 1024
TOO_MANY_CONNECTIONS = 4429  # as 429: the person's connection quota is full
BAD_ID = "Invalid request: id must be a string, a number or null."
DATABASE_UNAVAILABLE = "Service unavailable: the host's database did not answer; try again shortly."
# Close code when the channel layer failed: reconnect and replay. 1012 (service restart) in the
# private range, as 4401 is 401: daphne lets an application send only 1000 or 3000-4999.
SERVICE_RESTART = 4012


def answer_too_big(size: int) -> str:
    return (f"The answer would take {size} bytes, more than one message carries ({MAX_FRAME_BYTES}); "
            "ask for less (fetchTurns pages a chat's turns).")


class AhpConsumer(AccessConsumer):
    client_id: str | None  # set by initialize (or reconnect)
    connection_id: UUID | None  # its ClientConnection row, once initialized
    subscriptions: set[str]
    watches: dict[str, Watch]  # channel -> the resource watches this connection made
    heard: dict[str, SentOfChannel]  # channel -> what this socket has sent of it
    turn_tasks: set[asyncio.Task]
    background: set[asyncio.Task]  # tasks that must not block this consumer's own messages
    server_requests: dict[int, str]  # JSON-RPC id of a request this host sent -> channel awaiting the answer
    server_request_ids: Iterator[int]

    async def connect(self) -> None:
        offered = token_from_scope(self.scope)
        self.liveness_read = liveness.current()  # read before the token: a change meanwhile is re-read
        token, principal = await database_sync_to_async(authenticated)(offered)
        if token is None or principal is None:
            # Only a failure waits (its refusal), so a good token is never slowed by another's failures.
            key = throttle.key_of(self.scope, offered)
            await throttle.HANDSHAKES.wait(key)
            await throttle.HANDSHAKES.failed(key)
            await self.close(code=4401)
            return
        self.token_id = token.pk  # revoking it ends the connection
        self.token_expires = token.expires  # so does its expiry (a console page's token), with no access change
        self.revoked = False
        self.principal = principal
        self.tenant = self.principal.tenant
        self.access_groups = [token_group(token.pk)] + ([person_group(token.person_id)] if token.person_id else [])
        self.client_id = None
        self.connection_id = None
        self.subscriptions, self.watches, self.heard = set(), {}, {}
        self.turn_tasks, self.background, self.server_requests = set(), set(), {}
        self.server_request_ids = itertools.count(1)
        limit = settings.AHP_MAX_CONNECTIONS_PER_PERSON
        # Joined before accepting, so a revocation committed from here on reaches this socket.
        try:
            placed = await sockets.take_place(self, limit)  # counted from here when placed: the quota holds
            for group in self.access_groups if placed else ():
                await self.channel_layer.group_add(group, self.channel_name)
        except Exception as exc:
            if not sockets.is_layer_failure(exc):
                raise
            await self.accept()  # accepted only to say why: reconnect once the layer is back
            await self.close(code=SERVICE_RESTART)
            return
        if not placed:
            await self.accept()  # accepted only to say why: a refused upgrade carries no sentence
            await self.close(code=TOO_MANY_CONNECTIONS, reason=quotas.too_many_connections(limit))
            return
        await self.accept()
        ensure_started()
        homes.ensure_serving(methods.AT_HOME)

    async def dispatch(self, message: Message) -> None:
        """As Channels' own, without its hop onto the database thread before every message
        (layer messages included) to close stale connections: each hop of ours onto that
        thread (database_sync_to_async) does that itself."""
        handler = getattr(self, get_handler_name(message), None)
        if handler is None:
            raise ValueError(f"No handler for message type {message['type']}")
        await handler(message)

    async def __call__(self, scope: Message, receive: Callable[[], Awaitable[Message]],
                       send: Callable[[Message], Awaitable[None]]) -> None:
        """A failing channel layer (Redis restarting) ends the connection with SERVICE_RESTART,
        never a hang: the client reconnects and `reconnect` replays the log."""
        try:
            await super().__call__(scope, receive, send)
        except Exception as exc:
            if not hasattr(self, "tenant"):
                if sockets.is_layer_failure(exc):  # before set-up (the layer failed on its first receive)
                    await self.refuse_handshake(send, SERVICE_RESTART)
                    return
                raise  # the server answers the handshake
            if not sockets.is_layer_failure(exc):
                await self.leave()
                raise  # the server logs it and closes with 1011
            logger.warning("The channel layer failed (%s: %s); closing this process's sockets with %s",
                           exc.__class__.__name__, exc, SERVICE_RESTART)
            await self.abandon(SERVICE_RESTART)
            await sockets.close_all(SERVICE_RESTART)

    async def refuse_handshake(self, send: Callable[[Message], Awaitable[None]], code: int) -> None:
        """Accepted only to close with `code`, as every socket of a failing layer is: a refused
        upgrade (403) would tell the client nothing, and it would not know to come back."""
        try:
            await send({"type": "websocket.accept"})
            await send({"type": "websocket.close", "code": code})
        except Exception:
            logger.debug("The handshake was already answered", exc_info=True)

    async def abandon(self, code: int) -> None:
        """Close from this side and clean up without the channel layer, which may be down."""
        if getattr(self, "left", False):
            return
        try:
            await self.close(code=code)
        except Exception:
            logger.debug("The socket was already gone", exc_info=True)
        await self.leave(layer_up=False)

    async def websocket_disconnect(self, message: Message) -> None:
        """As Channels' own, without its hop onto the database thread to close stale connections
        afterwards (see `dispatch`); this consumer joins no `groups` of Channels' own."""
        await self.disconnect(message["code"])
        raise StopConsumer()

    async def disconnect(self, code: int) -> None:
        await self.leave()

    async def leave(self, layer_up: bool = True) -> None:
        if getattr(self, "left", False):
            return
        self.left = True
        await sockets.leave_place(self)
        for channel in list(getattr(self, "watches", ())):
            watches.release(self, channel)
        try:
            for channel in list(getattr(self, "subscriptions", ())) if layer_up else ():
                await self.channel_layer.group_discard(events.group_for(channel, self.tenant.pk), self.channel_name)
            for group in getattr(self, "access_groups", ()) if layer_up else ():
                await self.channel_layer.group_discard(group, self.channel_name)
        except Exception as exc:
            logger.info("Could not leave the channel layer's groups (%s); they expire there", exc)
        connection_id = getattr(self, "connection_id", None)
        if connection_id:
            await socket_rows.close_connection(connection_id, self.tenant, schedule=layer_up)

    # Frames ------------------------------------------------------------------------------------

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.revoked:
            return  # frames that were on their way when the socket was closed
        if self.token_expires is not None and timezone.now() >= self.token_expires:
            await self.close_revoked()
            return
        if liveness.current() != self.liveness_read and not await self.reread_access():
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
        if isinstance(message, dict) and not errors.valid_id(message.get("id")):
            await self.send_error(None, errors.INVALID_REQUEST, BAD_ID)
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0" or not isinstance(message.get("method"), str):
            request_id = message.get("id") if isinstance(message, dict) else None
            await self.send_error(request_id, errors.INVALID_REQUEST, "Invalid request: not a JSON-RPC 2.0 message.")
            return
        await self.answer(message)

    async def answer(self, message: Message) -> None:
        """Call the request's (or notification's) method and answer with its result or error."""
        request_id = message.get("id")
        # JSON-RPC never answers a notification: one that fails is logged and dropped (a bad
        # client action inside one is answered the AHP way, by its rejected envelope).
        answer = self.send_error if "id" in message else self.drop_failed_notification(message["method"])
        params = message.get("params", {})
        try:
            if not isinstance(params, dict):
                raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: params must be an object.")
            result = await methods.call(self, message["method"], params)
        except errors.RpcError as exc:
            await answer(request_id, exc.code, exc.message, exc.data)
            if exc.closes is not None:
                await self.close_after_answer(exc.closes, exc.message)
            return
        except Refused as refusal:
            await answer(request_id, refusal.answer.rpc_code, refusal.sentence)
            return
        except (OperationalError, InterfaceError) as exc:
            logger.warning("Method %s met an unavailable database: %s", message["method"], exc)
            await answer(request_id, errors.INTERNAL_ERROR, DATABASE_UNAVAILABLE)
            return
        except Exception:
            logger.exception("Method %s failed", message["method"])
            await answer(request_id, errors.INTERNAL_ERROR, "Internal error; the host logged it.")
            return
        if "id" in message:
            await self.send_json({"jsonrpc": "2.0", "id": request_id, "result": result})

    @staticmethod
    def drop_failed_notification(method: str) -> Callable[..., Awaitable[None]]:
        async def drop(request_id: Any, code: int, message: str, data: Any = None) -> None:
            logger.info("Dropped a malformed %s notification: %s", method, message)
        return drop

    # Lifecycle ---------------------------------------------------------------------------------

    @property
    def known_client_id(self) -> str:
        return errors.initialized(self.client_id)

    async def begin(self, client_id: str) -> int:
        """Answers the tenant's newest serverSeq as the connection opened."""
        if self.client_id is not None:
            raise errors.RpcError(errors.INVALID_REQUEST, "This connection is already initialized.")
        # The host may ask this client things (resourceRead) from any process: at this socket's
        # channel, which the connection's row names (tools_app.client_requests).
        connection, seq = await socket_rows.open_connection(self.tenant, client_id, events.PROCESS,
                                                            self.principal.person, self.channel_name)
        self.client_id = client_id
        self.connection_id = connection.id
        return seq

    def learn_client_plugins(self, active_client: ActiveClient) -> None:
        """The client's plugins may bring http MCP servers; their `.mcp.json` is on the client's
        machine, so the host asks the client."""
        self.in_background(learn_client_plugins(
            self.tenant.pk, active_client.session_id, active_client.client_id, active_client.owner_id,
            active_client.customizations))

    def interrupt_turn(self, turn: Turn) -> None:
        self.in_background(interrupt_turn(turn))

    def in_background(self, work: Coroutine[Any, Any, Any]) -> None:
        """A task: this consumer must stay free to carry the messages `work` waits on."""
        task = asyncio.get_running_loop().create_task(work)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def launch_turn(self, turn_id: UUID) -> None:
        task = asyncio.get_running_loop().create_task(run_turn(turn_id))
        self.turn_tasks.add(task)
        task.add_done_callback(self.turn_tasks.discard)

    # Channel layer messages --------------------------------------------------------------------

    async def ahp_action(self, message: Message) -> None:
        """One channel's actions in serverSeq order, each as its frame."""
        channel, seqs = message["channel"], message["seqs"]
        if channel not in self.subscriptions:
            return
        heard = self.heard.get(channel)
        if heard is None:
            heard = self.heard[channel] = SentOfChannel(seqs[0] - 1)
        for seq, frame in zip(seqs, message["frames"], strict=True):
            if heard.take(seq):  # not already sent from the log
                await self.send_frame(await subscriptions.frame_seen(self, channel, frame))

    def unheard(self, numbers: Iterable[tuple[str, int]]) -> list[int]:
        """The numbers among the logged (channel, seq) of this socket's channels it has not sent."""
        return [seq for channel, seq in numbers if channel in self.subscriptions
                and (heard := self.heard.get(channel)) is not None and not heard.has(seq)]

    async def catch_up(self, numbers: Iterable[tuple[str, int]], envelopes: dict[int, Message]) -> None:
        """Send, in serverSeq order, the logged actions of this socket's channels it has not sent
        (`numbers` (channel, seq), their `envelopes` by seq); all of them up to the newest read now
        count as heard."""
        newest: dict[str, int] = {}
        for channel, seq in numbers:
            heard = self.heard.get(channel)
            if heard is None or channel not in self.subscriptions:
                continue
            newest[channel] = seq
            if heard.take(seq) and seq in envelopes:
                await self.send_notification("action", await subscriptions.envelope_seen(self, envelopes[seq]))
        for channel, seq in newest.items():
            self.heard[channel].complete_to(seq)

    async def ahp_notification(self, message: Message) -> None:
        params = message["params"]
        session_uri = params.get("session") or params.get("summary", {}).get("resource")
        if holds(self.principal.grants, "session:read") or (
            session_uri and await database_sync_to_async(subscriptions.may_subscribe)(self, session_uri)
        ):
            await self.send_notification(message["method"], params)

    # Requests this host sends the client ---------------------------------------------------------

    @staticmethod
    def is_response(message: Any) -> bool:
        return (isinstance(message, dict) and "method" not in message and isinstance(message.get("id"), int)
                and ("result" in message or "error" in message))

    async def ahp_server_request(self, message: Message) -> None:
        """A tool (in any process) asks this client something; its answer goes to `reply_to`."""
        request_id = next(self.server_request_ids)
        self.server_requests[request_id] = message["reply_to"]
        await self.send_json({"jsonrpc": "2.0", "id": request_id, "method": message["method"],
                              "params": message["params"]})

    async def route_response(self, message: Message) -> None:
        reply_to = self.server_requests.pop(message["id"], None)
        if reply_to is None:
            return  # an answer nobody waits for any more (or to nothing we asked): dropped
        answer = {"type": "ahp.server_reply"}
        answer.update({"error": message["error"]} if "error" in message else {"result": message["result"]})
        await self.channel_layer.send(reply_to, answer)

    # Sending -----------------------------------------------------------------------------------

    async def send_json(self, payload: Message) -> None:
        await self.send_frame(json.dumps(payload), payload)  # ASCII: its length is its size in bytes

    async def send_frame(self, text: str, payload: Message | None = None) -> None:
        """`text`, the frame of `payload` (read back from it when not given, only if too big)."""
        if len(text) > MAX_FRAME_BYTES:
            await self.send_too_big(json.loads(text) if payload is None else payload, len(text))
            return
        try:
            await self.send(text_data=text)
        except OSError:
            # The client vanished while news for it was on its way (servers raise
            # ClientDisconnected); its websocket.disconnect follows and cleans up.
            logger.debug("Dropped a frame for a client that already left")

    async def send_too_big(self, payload: Message, size: int) -> None:
        """The host never sends what a peer holding to the 1 MiB limit would close the connection
        over: an answer becomes an error saying so; a notification is left out and logged."""
        if "id" in payload and "method" not in payload:
            await self.send_error(payload["id"], errors.INTERNAL_ERROR, answer_too_big(size))
            return
        params = payload.get("params") or {}
        logger.warning("Left out a %s of %d bytes on %s for client %s: more than one message carries",
                       payload.get("method"), size, params.get("channel"), self.client_id)

    async def send_notification(self, method: str, params: Mapping[str, object]) -> None:
        await self.send_frame(events.notification_frame(method, params))

    async def send_error(self, request_id: Any, code: int, message: str, data: Any = None) -> None:
        error = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        await self.send_json({"jsonrpc": "2.0", "id": request_id, "error": error})

