"""`completions` for a message being composed: an `@` word before the cursor is completed with the
names of files and folders in the chat's session's working directories (listed as the file
commands list them: by descriptor, as the session's identity, following no link)."""
import posixpath
import re
from pathlib import Path
from typing import TYPE_CHECKING

from grants.models import Principal
from kernel.orm import database_sync_to_async
from kernel.refusals import Refused
from sandbox.workspaces import folder_path
from sessions_app.channels import chat_at
from sessions_app.models import Session
from tools_app.families import files

from . import errors
from .errors import Params

if TYPE_CHECKING:
    from .consumer import AhpConsumer

MAX_ITEMS = 50
MENTION = re.compile(r"(?:^|(?<=\s))@(\S*)$")


def mention(text: str, offset: int) -> tuple[int, str] | None:
    """(where the `@` word before `offset` starts, what follows the `@`), or None."""
    found = MENTION.search(text[:offset])
    return (found.start(), found.group(1)) if found else None


def file_items(principal: Principal, session: Session, start: int, end: int, typed: str) -> list[Params]:
    """Completion items for `typed` (a path relative to a working directory, its last part a prefix)."""
    folder_part, _, prefix = typed.rpartition("/")
    if posixpath.isabs(folder_part) or ".." in folder_part.split("/"):
        return []
    items = []
    for directory in session.working_directories:
        base = folder_path(directory)
        if base is None:
            continue
        folder = Path(base) / folder_part if folder_part else Path(base)
        try:
            entries = files.list_folder(principal, folder.as_uri())["entries"]
        except Refused:  # best effort: a folder not there, or reached through a link, offers nothing
            continue
        for entry in entries:
            if not entry["name"].lower().startswith(prefix.lower()):
                continue
            relative = f"{folder_part}/{entry['name']}" if folder_part else entry["name"]
            items.append({"insertText": f"@{relative}", "rangeStart": start, "rangeEnd": end,
                          "attachment": {"type": "resource", "label": entry["name"],
                                         "uri": (folder / entry["name"]).as_uri()}})
            if len(items) == MAX_ITEMS:
                return items
    return items


async def completions(consumer: "AhpConsumer", params: Params) -> Params:
    """CompletionsParams {channel (a chat), kind, text, offset} -> {items}."""
    uri = errors.require(params, "channel", str)
    kind = errors.require(params, "kind", str)
    text = errors.require(params, "text", str)
    offset = params.get("offset")
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= len(text):
        raise errors.RpcError(errors.INVALID_PARAMS, "Invalid params: offset must be a number from 0 to the text's "
                                                     "length.")

    def items() -> list[Params]:
        chat = chat_at(uri, consumer.tenant)
        if chat is None or not consumer.principal.may("session:read", chat.session):
            raise errors.RpcError(errors.NOT_FOUND, f"No chat {uri} here.")
        found = mention(text, offset) if kind == "userMessage" else None
        return file_items(consumer.principal, chat.session, found[0], offset, found[1]) if found else []

    return {"items": await database_sync_to_async(items)()}


COMMANDS = {"completions": completions}
