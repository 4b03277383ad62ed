"""Requests that touch a session's files or processes run at the session's home (one host
process on one node, sessions_app/actions/homes.py): any other process that gets one hands it,
with who asked, over the channel layer to the home's own channel, and relays its answer (an
error with the same code and sentence). Without a shared channel layer (the embedded host) no
other process is reachable, and every request runs where it arrives.

The home runs the request through the same handler as a socket of its own would, for a
`Visitor`: the asking connection's tenant, person, grants and client id. What the handler sends
that connection (a rejected action's echo) travels back with the answer. Such a handler takes an
`Asker`, what a socket and a visitor both are, so mypy tells when it uses what a visitor lacks."""
import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, TypeVar
from uuid import UUID

from channels.layers import get_channel_layer
from django.contrib.auth import get_user_model

from grants.models import Principal, Tenant
from kernel.orm import database_sync_to_async
from kernel.refusals import Refused
from sessions_app.actions.homes import ENDED_HERE, LEASE_SECONDS, alive, do_find_home, home_channel, shared_layer
from sessions_app.channels import parse
from sessions_app.events import PROCESS
from sessions_app.events.sockets import HEARTBEAT_SECONDS, is_layer_failure
from sessions_app.models import ActiveClient, Chat, Session, Turn
from tools_app.families import files
from tools_app.families.mcp_servers.server_tools import learn_client_plugins
from tools_app.families.terminals.models import Terminal
from tools_app.runtime.turns import interrupt_turn, run_turn
from tools_app.sessions import end_here

from . import errors

logger = logging.getLogger(__name__)

ANSWER_SECONDS = 30
HOME_SILENT = (f"The node running this session did not answer within {ANSWER_SECONDS} s; "
               "send the request again.")
# The client actions that start or stop a session's processes (a turn's agent, a terminal's shell).
HOMED_ACTIONS = ("chat/turnStarted", "chat/turnCancelled", "chat/pendingMessageSet", "terminal/input",
                 "terminal/resized")


class Asker(Protocol):
    """The connection a request acts for: a socket (consumer.AhpConsumer) where it arrived, or
    a `Visitor` at its session's home. What a handler that may run at a home uses of it."""
    tenant: Tenant
    principal: Principal
    client_id: str | None  # None until the connection is initialized

    @property
    def known_client_id(self) -> str: ...

    async def send_notification(self, method: str, params: Mapping[str, object]) -> None: ...

    def launch_turn(self, turn_id: UUID) -> None: ...

    def interrupt_turn(self, turn: Turn) -> None: ...

    def learn_client_plugins(self, active_client: ActiveClient) -> None: ...


Handler = Callable[[Asker, dict[str, Any]], Awaitable[Any]]
Connection = TypeVar("Connection", bound=Asker)  # at_home's: its handler runs there for the connection it was given
# Message type -> what answers it at the home, for the doors other than the socket's (the MCP
# endpoint's tools/call, ahp.mcp.at_home): its result, sent back as the socket's is.
Answerer = Callable[[dict[str, Any]], Awaitable[Any]]
ANSWERERS: dict[str, Answerer] = {}
# event loop -> its task answering this process's requests
_serving: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Task] = weakref.WeakKeyDictionary()
_kept: set[asyncio.Task] = set()  # requests and turns begun for visitors, kept from the garbage collector
# (tenant id, person id) -> (read at, tenant, person) of the visitors this process served
_rows: dict[tuple[int, int | None], tuple[float, Tenant, Any]] = {}
REMEMBERED_ROWS = 10_000


# The session a request touches ---------------------------------------------------------------

def session_named(tenant: Tenant, uri: Any) -> str | None:
    """The id of the tenant's session that `uri` (a session, chat or terminal) belongs to."""
    kind, key = parse(uri) if isinstance(uri, str) else (None, None)
    if key is None:
        return None
    rows = {"session": Session.objects.filter(tenant=tenant, id=key).values_list("id", flat=True),
            "chat": Chat.objects.filter(session__tenant=tenant, id=key).values_list("session_id", flat=True),
            "terminal": Terminal.objects.filter(session__tenant=tenant, id=key).values_list("session_id", flat=True)}
    found = rows[kind].first() if kind in rows else None
    return str(found) if found else None


def session_of_file(consumer: Asker, params: dict, name: str = "uri") -> str | None:
    try:
        return files.allowed_place(consumer.principal, params.get(name), "session:read").session_id
    except Refused:
        return None  # refused where it arrives, in the same words


def session_of_terminal(consumer: Asker, params: dict) -> str | None:
    claim = params.get("claim")
    return session_named(consumer.tenant, params.get("session") or (claim.get("session") if isinstance(claim, dict)
                                                                    else None))


def session_of_action(consumer: Asker, params: dict) -> str | None:
    action = params.get("action")
    if not isinstance(action, dict) or action.get("type") not in HOMED_ACTIONS:
        return None
    return session_named(consumer.tenant, params.get("channel"))


def session_of_channel(consumer: Asker, params: dict) -> str | None:
    return session_named(consumer.tenant, params.get("channel"))


SESSION_OF: dict[str, Callable[[Asker, dict], str | None]] = {
    **{method: session_of_file for method in (
        "resourceResolve", "resourceList", "resourceRead", "resourceWrite", "resourceMkdir", "resourceDelete")},
    "resourceCopy": lambda consumer, params: session_of_file(consumer, params, "source"),
    "resourceMove": lambda consumer, params: session_of_file(consumer, params, "source"),
    "createTerminal": session_of_terminal,
    "disposeTerminal": session_of_channel,
    "disposeSession": session_of_channel,
    "dispatchAction": session_of_action,
}


def home_for(consumer: Asker, method: str, params: dict) -> str:
    """The process that must run `method`: the home of the session it touches, or this one."""
    session_id = SESSION_OF[method](consumer, params)
    return do_find_home(session_id) if session_id else PROCESS


def make_home_here(session_id: str) -> None:
    """A session made here has its home here."""
    if shared_layer():
        do_find_home(session_id)


# Asking the home -------------------------------------------------------------------------------

async def at_home(consumer: Connection, method: str, params: dict,
                  handler: Callable[[Connection, dict], Awaitable[Any]]) -> Any:
    """`handler`'s answer to the request, run at the home of the session it touches (there by
    the home's own handler of `method`, which `ensure_serving` was given)."""
    if method not in SESSION_OF or not shared_layer():
        return await handler(consumer, params)
    while True:
        home = await database_sync_to_async(home_for)(consumer, method, params)
        if home == PROCESS:
            return await handler(consumer, params)
        answered, result = await relay(consumer, home, method, params)
        if answered:
            return result
        # The home stopped renewing its lease before it answered: asked again, the session is
        # taken by a live process (this one, or one that took it meanwhile).


async def relay(consumer: Asker, home: str, method: str, params: dict) -> tuple[bool, Any]:
    """(True, the home's answer), or (False, None) once the home's lease lapsed unanswered."""
    principal = consumer.principal
    answer = await ask_home(home, {
        "type": "ahp.home_request", "method": method, "params": params,
        "tenant_id": consumer.tenant.pk, "person_id": principal.person_id, "grants": list(principal.grants),
        "token_id": principal.token_id, "client_id": consumer.client_id}, ANSWER_SECONDS)
    if answer is None:
        return False, None
    for notification, notification_params in answer.get("notifications", ()):
        await consumer.send_notification(notification, notification_params)
    if "error" in answer:
        error = answer["error"]
        raise errors.RpcError(error["code"], error["message"], error.get("data"))
    return True, answer.get("result")


async def ask_home(home: str, message: dict, answer_within: float | None) -> dict | None:
    """The home's answer to `message`, or None once the home's lease lapsed unanswered. A home
    that lives and has not answered within `answer_within` seconds is an error (None: it is
    waited on while it lives, as a tool call bounded by its own deadline)."""
    layer = get_channel_layer()
    reply_to = await layer.new_channel()
    await layer.send(home_channel(home), {**message, "reply_to": reply_to})
    loop, asked = asyncio.get_running_loop(), time.monotonic()
    tick = min(LEASE_SECONDS, answer_within or LEASE_SECONDS)
    # Each wait ends with the answer or a tick, itself a message: a receive on the layer is never
    # cancelled. At each tick the home's lease is read.
    try:
        while True:
            timer = loop.call_later(tick, lambda: loop.create_task(layer.send(reply_to, {"type": "tick"})))
            try:
                answer = await layer.receive(reply_to)
            finally:
                timer.cancel()
            if answer.get("type") != "tick":
                return answer
            if not await database_sync_to_async(alive)(home):
                return None
            if answer_within is not None and time.monotonic() - asked >= answer_within:
                raise errors.RpcError(errors.INTERNAL_ERROR, HOME_SILENT)
    finally:
        if hasattr(layer, "delete_channel"):
            await layer.delete_channel(reply_to)


# Answering as the home -------------------------------------------------------------------------

class Visitor:
    """The connection a request came from, as its session's home acts for it."""

    def __init__(self, tenant: Tenant, principal: Principal, client_id: str | None) -> None:
        self.tenant = tenant
        self.principal = principal
        self.client_id = client_id
        self.notifications: list[tuple[str, Mapping[str, object]]] = []

    @property
    def known_client_id(self) -> str:
        return errors.initialized(self.client_id)

    async def send_notification(self, method: str, params: Mapping[str, object]) -> None:
        self.notifications.append((method, params))

    def launch_turn(self, turn_id: UUID) -> None:
        keep(run_turn(turn_id))

    def interrupt_turn(self, turn: Turn) -> None:
        keep(interrupt_turn(turn))

    def learn_client_plugins(self, active_client: ActiveClient) -> None:
        # What session/activeClientSet starts: not handed to a home today, but any action's `then` may run here.
        keep(learn_client_plugins(self.tenant.pk, active_client.session_id, active_client.client_id,
                                  active_client.owner_id, active_client.customizations))


def keep(work: Awaitable) -> None:
    task = asyncio.ensure_future(work)
    _kept.add(task)
    task.add_done_callback(_kept.discard)


def rows_of(tenant_id: int, person_id: int | None) -> tuple[Tenant, Any]:
    tenant = Tenant.objects.get(pk=tenant_id)
    return tenant, get_user_model().objects.get(pk=person_id) if person_id is not None else None


async def visitor_of(message: dict) -> Visitor:
    """The asker's tenant and person rows are read again after a heartbeat, not at every request:
    the asking socket holds its own copies for its life, and sends the grants it acts with."""
    key, now = (message["tenant_id"], message["person_id"]), time.monotonic()
    known = _rows.get(key)
    if known is None or now - known[0] > HEARTBEAT_SECONDS:
        if len(_rows) >= REMEMBERED_ROWS:
            _rows.clear()
        known = _rows[key] = (now, *await database_sync_to_async(rows_of)(*key))
    _, tenant, person = known
    return Visitor(tenant, Principal(tenant, person, message["grants"], message["token_id"]), message["client_id"])


def as_error(exc: Exception, method: str) -> dict:
    if isinstance(exc, errors.RpcError):
        return {"code": exc.code, "message": exc.message, "data": exc.data}
    if isinstance(exc, Refused):
        return {"code": exc.answer.rpc_code, "message": exc.sentence}
    logger.error("Method %s failed at its session's home", method, exc_info=exc)
    return {"code": errors.INTERNAL_ERROR, "message": "Internal error; the host logged it."}


async def answer(message: dict, handlers: Mapping[str, Handler]) -> None:
    """A socket's request, answered as the home (its notifications travel with the answer)."""
    visitor = None
    try:
        visitor = await visitor_of(message)
        reply = {"result": await handlers[message["method"]](visitor, message["params"])}
    except Exception as exc:
        reply = {"error": as_error(exc, message["method"])}
    reply["notifications"] = visitor.notifications if visitor else []
    await get_channel_layer().send(message["reply_to"], {"type": "ahp.home_answer", **reply})


async def answer_for_door(message: dict[str, Any], answerer: Answerer) -> None:
    """Another door's request, answered as the home."""
    try:
        reply = {"result": await answerer(message)}
    except Exception as exc:
        reply = {"error": as_error(exc, message["type"])}
    await get_channel_layer().send(message["reply_to"], {"type": "ahp.home_answer", **reply})


def ensure_serving(handlers: Mapping[str, Handler]) -> None:
    """While the running loop lives, this process answers the requests other processes hand it
    for the sessions it is home to, with `handlers` (the connection's own table of methods)."""
    loop = asyncio.get_running_loop()
    if loop not in _serving and shared_layer():
        _serving[loop] = loop.create_task(serve(handlers))


async def serve(handlers: Mapping[str, Handler]) -> None:
    """Answer, as long as the loop runs, what other processes hand this one as its sessions' home."""
    layer = get_channel_layer()
    while True:
        try:
            message = await layer.receive(home_channel(PROCESS))
        except Exception as exc:
            if not is_layer_failure(exc):
                raise
            logger.warning("This process's home requests are unreachable (%s); listening again", exc)
            await asyncio.sleep(1)
            continue
        kind = message.get("type")
        if kind == "ahp.home_turn":
            keep(run_turn(message["turn_id"], at_home=True))
        elif kind == ENDED_HERE:
            keep(database_sync_to_async(end_here)(message))
        elif kind in ANSWERERS:
            keep(answer_for_door(message, ANSWERERS[kind]))
        else:
            keep(answer(message, handlers))
