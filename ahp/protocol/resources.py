"""The `resource*` commands for `file:` URIs in sessions' working directories
(tools_app.families.files decides what may be reached)."""

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from kernel.orm import database_sync_to_async
from tools_app.families import files

from . import errors
from .errors import Params

if TYPE_CHECKING:
    from .consumer import AhpConsumer
    from .homes import Asker, Handler


def answered(work: Callable[[], Any]) -> Awaitable[Any]:
    """Run `work` off the loop (a Refused answers with its kind's JSON-RPC code)."""
    return database_sync_to_async(work)()


def flag(params: Params, name: str) -> bool:
    value = params.get(name, False)
    if not isinstance(value, bool):
        raise errors.RpcError(errors.INVALID_PARAMS, f"Invalid params: {name} must be a boolean.")
    return value


async def resource_resolve(consumer: "Asker", params: Params) -> Params:
    uri = errors.require(params, "uri", str)
    return await answered(lambda: files.resolve(consumer.principal, uri))


async def resource_list(consumer: "Asker", params: Params) -> Params:
    uri = errors.require(params, "uri", str)
    return await answered(lambda: files.list_folder(consumer.principal, uri))


async def resource_read(consumer: "Asker", params: Params) -> Params:
    uri = errors.require(params, "uri", str)
    encoding = params.get("encoding")
    if encoding is not None and encoding not in files.ENCODINGS:
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: encoding must be utf-8 or base64.")
    return await answered(lambda: files.read(consumer.principal, uri, encoding))


async def resource_write(consumer: "Asker", params: Params) -> Params:
    uri = errors.require(params, "uri", str)
    data = errors.require(params, "data", str)
    encoding = errors.require(params, "encoding", str)
    if encoding not in files.ENCODINGS:
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: encoding must be utf-8 or base64.")
    if params.get("mode", "truncate") != "truncate" or params.get("position", 0) != 0:
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: this host writes whole files only "
                                                     "(mode truncate at position 0).")
    if_match = params.get("ifMatch")
    if if_match is not None and not isinstance(if_match, str):
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: ifMatch must be a string.")
    create_only = flag(params, "createOnly")
    return await answered(lambda: files.do_write_file(consumer.principal, uri, data, encoding, create_only, if_match))


async def resource_mkdir(consumer: "Asker", params: Params) -> Params:
    uri = errors.require(params, "uri", str)
    return await answered(lambda: files.do_make_folder(consumer.principal, uri))


async def resource_delete(consumer: "Asker", params: Params) -> Params:
    uri = errors.require(params, "uri", str)
    recursive = flag(params, "recursive")
    return await answered(lambda: files.do_delete_file(consumer.principal, uri, recursive))


async def resource_copy(consumer: "Asker", params: Params) -> Params:
    source, destination = errors.require(params, "source", str), errors.require(params, "destination", str)
    fail_if_exists = flag(params, "failIfExists")
    return await answered(lambda: files.do_copy_file(consumer.principal, source, destination, fail_if_exists))


async def resource_move(consumer: "Asker", params: Params) -> Params:
    source, destination = errors.require(params, "source", str), errors.require(params, "destination", str)
    fail_if_exists = flag(params, "failIfExists")
    return await answered(lambda: files.do_move_file(consumer.principal, source, destination, fail_if_exists))


async def resource_request(consumer: "AhpConsumer", params: Params) -> Params:
    uri = errors.require(params, "uri", str)
    read, write = flag(params, "read"), flag(params, "write")
    return await answered(lambda: files.request_access(consumer.principal, uri, read, write))


COMMANDS = {"resourceRequest": resource_request}
# Those that touch a session's files, run at its home (homes.SESSION_OF).
AT_HOME: dict[str, "Handler"] = {
    "resourceCopy": resource_copy,
    "resourceMove": resource_move,
    "resourceResolve": resource_resolve,
    "resourceList": resource_list,
    "resourceRead": resource_read,
    "resourceWrite": resource_write,
    "resourceMkdir": resource_mkdir,
    "resourceDelete": resource_delete,
}
