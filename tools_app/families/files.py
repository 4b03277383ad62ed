"""Files in sessions' working directories, as a client's `resource*` commands reach them: a
`file:` URI is served only when its real path (every `..` and symlink resolved) lies in a
working directory of a session the caller may read (session:read) or, to change it, whose
folders it may change (session:folders). Each is re-checked at the moment of use."""
import base64
import mimetypes
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

from kernel.refusals import Refused
from sandbox.workspaces import OutsideWorkspace, checked_folder, folder_path, is_within
from sessions_app.models import Session

MAX_READ_BYTES = 4 * 1024 * 1024
ENCODINGS = ("utf-8", "base64")


def not_found(sentence):
    return Refused(sentence, "not_found")


def real_target(uri):
    path = folder_path(uri) if isinstance(uri, str) and uri.startswith("file:") else None
    if path is None or "\x00" in path:
        raise Refused("Invalid params: uri must be an absolute file: URI.", "invalid")
    return Path(os.path.realpath(path))


def allowed_path(principal, uri, grant):
    return allowed_place(principal, uri, grant)[0]


def allowed_place(principal, uri, grant):
    """(real path `uri` names, the working directory holding it), when that is a working
    directory of a session `principal` holds `grant` on; refused otherwise, in the same words
    whatever lies there."""
    target = real_target(uri)
    for session in Session.objects.visible_to(principal).exclude(working_directories=[]).only(
            "id", "tenant", "owner", "working_directories"):
        for directory in session.working_directories:
            try:
                folder = checked_folder(principal.tenant, directory)
            except OutsideWorkspace:
                continue
            if is_within(target, folder) and principal.may(grant, session):
                return target, folder
    doing = "change files in" if grant == "session:folders" else "read"
    raise Refused(f"{target} is outside the working directories of every session you may {doing}.", "permission")


def etag(stat):
    return f'W/"{stat.st_size}-{stat.st_mtime_ns}"'


def resolve(principal, uri):
    path = allowed_path(principal, uri, "session:read")
    if not path.exists():
        raise not_found(f"No file {path}.")
    stat = path.stat()
    return {"uri": path.as_uri(), "type": "directory" if path.is_dir() else "file", "size": stat.st_size,
            "mtime": datetime.fromtimestamp(stat.st_mtime, timezone.utc).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"), "etag": etag(stat)}


def list_folder(principal, uri):
    path = allowed_path(principal, uri, "session:read")
    if not path.exists():
        raise not_found(f"No folder {path}.")
    if not path.is_dir():
        raise Refused(f"Invalid params: {path} is not a folder.", "invalid")
    return {"entries": [{"name": entry.name, "type": "directory" if entry.is_dir() else "file"}
                        for entry in sorted(path.iterdir(), key=lambda e: e.name)]}


def read(principal, uri, encoding=None):
    path = allowed_path(principal, uri, "session:read")
    if not path.is_file():
        raise not_found(f"No file {path}.")
    if path.stat().st_size > MAX_READ_BYTES:
        raise Refused(f"{path} is larger than {MAX_READ_BYTES} bytes; this host reads no more at once.", "invalid")
    data = path.read_bytes()
    content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if encoding != "base64":
        try:
            return {"data": data.decode("utf-8"), "encoding": "utf-8", "contentType": content_type}
        except UnicodeDecodeError:
            pass  # not text: base64, as the protocol asks of binary content
    return {"data": base64.b64encode(data).decode(), "encoding": "base64", "contentType": content_type}


def decoded(data, encoding):
    if encoding == "utf-8":
        return data.encode("utf-8")
    try:
        return base64.b64decode(data, validate=True)
    except ValueError:
        raise Refused("Invalid params: data is not base64.", "invalid") from None


def do_write_file(principal, uri, data, encoding, create_only=False, if_match=None):
    """resourceWrite in truncate mode at 0 (a whole file), the one write this host offers."""
    path = allowed_path(principal, uri, "session:folders")
    if not path.parent.is_dir():
        raise not_found(f"No folder {path.parent}.")
    if path.exists() and create_only:
        raise Refused(f"{path} already exists.", "exists")
    if if_match is not None and (not path.exists() or etag(path.stat()) != if_match):
        raise Refused(f"{path} changed since {if_match}.", "conflict")
    if path.is_dir():
        raise Refused(f"Invalid params: {path} is a folder.", "invalid")
    content = decoded(data, encoding)
    with open(allowed_path(principal, uri, "session:folders"), "wb") as handle:  # checked again at the use
        handle.write(content)
    return {}


def do_make_folder(principal, uri):
    path = allowed_path(principal, uri, "session:folders")
    if path.exists():
        raise Refused(f"{path} already exists.", "exists")
    if not path.parent.is_dir():
        raise not_found(f"No folder {path.parent}.")
    path.mkdir()
    return {}


def do_delete_file(principal, uri, recursive=False):
    path, folder = allowed_place(principal, uri, "session:folders")
    if not path.exists():
        raise not_found(f"No file {path}.")
    if path == folder:
        raise Refused(f"{path} is a session's working directory; end the session instead.", "conflict")
    if path.is_dir():
        if any(path.iterdir()) and not recursive:
            raise Refused(f"{path} is not empty; delete it with recursive.", "conflict")
        shutil.rmtree(path)
    else:
        path.unlink()
    return {}


def checked_pair(principal, source, destination, move, fail_if_exists):
    """(source path, destination path) for resourceCopy and resourceMove: the source readable
    (changeable, for a move), the destination changeable, its folder there."""
    src, src_folder = allowed_place(principal, source, "session:folders" if move else "session:read")
    dst = allowed_path(principal, destination, "session:folders")
    if not src.exists():
        raise not_found(f"No file {src}.")
    if move and src == src_folder:
        raise Refused(f"{src} is a session's working directory; it stays where the session has it.", "conflict")
    if not dst.parent.is_dir():
        raise not_found(f"No folder {dst.parent}.")
    if dst.exists() and fail_if_exists:
        raise Refused(f"{dst} already exists.", "exists")
    if dst == src or is_within(dst, src):
        raise Refused(f"{dst} is {src} or inside it.", "conflict")
    return src, dst


def do_copy_file(principal, source, destination, fail_if_exists=False):
    src, dst = checked_pair(principal, source, destination, False, fail_if_exists)
    if src.is_dir():
        # Links are copied as links: following one would bring in what lies outside the folders.
        shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=not fail_if_exists)
    else:
        shutil.copyfile(src, dst)
    return {}


def do_move_file(principal, source, destination, fail_if_exists=False):
    src, dst = checked_pair(principal, source, destination, True, fail_if_exists)
    if dst.is_dir():
        raise Refused(f"{dst} is a folder; this host moves onto a file or a new name only.", "conflict")
    os.replace(src, dst)
    return {}
