"""Files in sessions' working directories, as a client's `resource*` commands reach them: a
`file:` URI is served only when it names (spelled without `..` tricks: its path is normalised
first) a place in a working directory of a session the caller may read (session:read) or, to
change it, whose folders it may change (session:folders).

The host never opens such a path by name: every step is one `openat2` beneath the host's
workspace root that follows no link (sandbox/beneath.py), taken as the session's own sandbox
identity. A link the tenant swaps in at any moment is refused, never followed, and what the
host writes belongs to the session."""
import base64
import errno
import mimetypes
import os
import stat
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from kernel.refusals import Refused
from sandbox.beneath import as_identity, open_beneath, open_root, remove_tree
from sandbox.bubblewrap import Sandbox
from sandbox.workspaces import (
    OutsideWorkspace,
    checked_folder,
    folder_path,
    host_root,
    is_within,
    relative_to_host_root,
)
from sessions_app.models import Session

MAX_READ_BYTES = 4 * 1024 * 1024
ENCODINGS = ("utf-8", "base64")
COPY_CHUNK = 1024 * 1024


def not_found(sentence):
    return Refused(sentence, "not_found")


def through_link(path):
    return Refused(f"{path} is reached through a link; this host follows no link in a session's folders.",
                   "permission")


def target_path(uri):
    path = folder_path(uri) if isinstance(uri, str) and uri.startswith("file:") else None
    if path is None or "\x00" in path:
        raise Refused("Invalid params: uri must be an absolute file: URI.", "invalid")
    return Path(os.path.normpath(path))


@dataclass(frozen=True)
class Place:
    """A path in a session's working directory, and whose hands touch it: that session's."""

    path: Path
    folder: Path
    session_id: str
    tenant_id: int

    @contextmanager
    def hands(self):
        """The host's workspace root, opened, with this thread acting as the session's sandbox."""
        root = open_root(host_root())
        try:
            with as_identity(*Sandbox(self.session_id, tenant_id=self.tenant_id).owner()):
                yield Hands(root)
        finally:
            os.close(root)


class Hands:
    """Each operation on one path, beneath the root, through no link; OSError becomes a sentence."""

    def __init__(self, root):
        self.root = root

    def open(self, path, flags, mode=0o666):
        try:
            return open_beneath(self.root, relative_to_host_root(str(path)), flags, mode)
        except OSError as error:
            raise refusal(error, path) from None

    def stat(self, path):
        """The stat of `path` itself (a link is a link), or None when nothing is there."""
        parent, name = self.parent(path)
        try:
            return os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return None
        finally:
            os.close(parent)

    def parent(self, path):
        """(descriptor of the folder holding `path`, its name there)."""
        try:
            return open_beneath(self.root, relative_to_host_root(str(path.parent)), os.O_RDONLY | os.O_DIRECTORY), \
                path.name
        except (FileNotFoundError, NotADirectoryError):
            raise not_found(f"No folder {path.parent}.") from None
        except OSError as error:
            raise refusal(error, path.parent) from None


@contextmanager
def held(hands, path):
    """(descriptor of the folder holding `path`, its name there), closed after; an OSError inside
    answers the path's sentence."""
    parent, name = hands.parent(path)
    try:
        yield parent, name
    except OSError as error:
        raise refusal(error, path) from None
    finally:
        os.close(parent)


def refusal(error, path):
    if error.errno in (errno.ELOOP, errno.EXDEV):
        return through_link(path)
    if error.errno in (errno.ENOENT, errno.ENOTDIR):
        return not_found(f"No file {path}.")
    if error.errno == errno.EACCES:
        return Refused(f"{path} cannot be reached by the session's sandbox.", "permission")
    return Refused(f"{path}: {error.strerror}.", "conflict")


def allowed_place(principal, uri, grant):
    """The Place `uri` names, when it lies in a working directory of a session `principal` holds
    `grant` on; refused otherwise, in the same words whatever lies there. Where several sessions'
    folders hold it, the session of the deepest folder acts, and of equally deep ones the oldest
    session: the same hands every time, whichever node asks."""
    target = target_path(uri)
    found = None
    for session in Session.objects.visible_to(principal).exclude(working_directories=[]).only(
            "id", "tenant", "owner", "working_directories", "created").order_by("created", "id"):
        for directory in session.working_directories:
            try:
                folder = checked_folder(principal.tenant, directory)
            except OutsideWorkspace:
                continue
            if (is_within(target, folder) and (found is None or len(folder.parts) > len(found.folder.parts))
                    and principal.may(grant, session)):
                found = Place(target, folder, str(session.id), session.tenant_id)
    if found is not None:
        return found
    doing = "change files in" if grant == "session:folders" else "read"
    raise Refused(f"{target} is outside the working directories of every session you may {doing}.", "permission")


def etag(status):
    return f'W/"{status.st_size}-{status.st_mtime_ns}"'


def kind(status):
    return "directory" if stat.S_ISDIR(status.st_mode) else "file"


def resolve(principal, uri):
    place = allowed_place(principal, uri, "session:read")
    with place.hands() as hands:
        status = hands.stat(place.path)
    if status is None:
        raise not_found(f"No file {place.path}.")
    return {"uri": place.path.as_uri(), "type": kind(status), "size": status.st_size,
            "mtime": datetime.fromtimestamp(status.st_mtime, timezone.utc).isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"), "etag": etag(status)}


def list_folder(principal, uri):
    place = allowed_place(principal, uri, "session:read")
    with place.hands() as hands:
        if (status := hands.stat(place.path)) is None:
            raise not_found(f"No folder {place.path}.")
        if not stat.S_ISDIR(status.st_mode):
            raise Refused(f"Invalid params: {place.path} is not a folder.", "invalid")
        folder = hands.open(place.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            entries = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in os.scandir(folder)]
        finally:
            os.close(folder)
    return {"entries": [{"name": name, "type": "directory" if is_dir else "file"} for name, is_dir in sorted(entries)]}


def read_all(fd, path):
    with os.fdopen(fd, "rb") as handle:
        if os.fstat(handle.fileno()).st_size > MAX_READ_BYTES:
            raise Refused(f"{path} is larger than {MAX_READ_BYTES} bytes; this host reads no more at once.", "invalid")
        return handle.read(MAX_READ_BYTES + 1)


def read(principal, uri, encoding=None):
    place = allowed_place(principal, uri, "session:read")
    with place.hands() as hands:
        status = hands.stat(place.path)
        if status is not None and stat.S_ISLNK(status.st_mode):
            raise through_link(place.path)
        if status is None or not stat.S_ISREG(status.st_mode):
            raise not_found(f"No file {place.path}.")
        data = read_all(hands.open(place.path, os.O_RDONLY | os.O_NONBLOCK), place.path)
    content_type = mimetypes.guess_type(place.path.name)[0] or "application/octet-stream"
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


def not_a_file(path):
    return Refused(f"{path} is not a regular file; this host writes regular files only.", "conflict")


def open_for_writing(folder, name, path, exclusive):
    """A descriptor to write `name` in `folder` from its start: never blocking (a FIFO there is
    refused, not waited on), never through a link, and only a regular file."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | (os.O_EXCL if exclusive else 0)
    try:
        fd = os.open(name, flags, 0o664, dir_fd=folder)
    except OSError as error:
        if error.errno == errno.ENXIO:  # a FIFO no one reads
            raise not_a_file(path) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise not_a_file(path)
    os.set_blocking(fd, True)
    os.ftruncate(fd, 0)
    return fd


def write_all(fd, content):
    with os.fdopen(fd, "wb") as handle:
        handle.write(content)


def do_write_file(principal, uri, data, encoding, create_only=False, if_match=None):
    """resourceWrite in truncate mode at 0 (a whole file), the one write this host offers."""
    place = allowed_place(principal, uri, "session:folders")
    content = decoded(data, encoding)
    path = place.path
    with place.hands() as hands:
        status = hands.stat(path)
        if status is not None and create_only:
            raise Refused(f"{path} already exists.", "exists")
        if if_match is not None and (status is None or etag(status) != if_match):
            raise Refused(f"{path} changed since {if_match}.", "conflict")
        if status is not None and stat.S_ISDIR(status.st_mode):
            raise Refused(f"Invalid params: {path} is a folder.", "invalid")
        with held(hands, path) as (parent, name):
            write_all(open_for_writing(parent, name, path, create_only), content)
    return {}


FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def step_into(folder, name, path):
    """The descriptor of the folder `name` in the open `folder` (at `path`), made when missing;
    a link or anything but a folder there is refused."""
    for _ in range(2):  # a folder made or removed meanwhile by someone else: look once more
        try:
            return os.open(name, FOLDER_FLAGS, dir_fd=folder)
        except FileNotFoundError:
            try:
                os.mkdir(name, 0o2775, dir_fd=folder)
            except FileExistsError:
                pass
        except OSError as error:
            if error.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise
            if stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
                raise through_link(path) from None
            raise Refused(f"{path} already exists and is not a folder.", "exists") from None
    return os.open(name, FOLDER_FLAGS, dir_fd=folder)


def do_make_folder(principal, uri):
    """resourceMkdir, as `mkdir -p`: every missing folder on the way is made, one by one from the
    session's working directory down by descriptor; a folder already there is a success."""
    place = allowed_place(principal, uri, "session:folders")
    with place.hands() as hands:
        folder, path = hands.open(place.folder, os.O_RDONLY | os.O_DIRECTORY), place.folder
        try:
            for name in place.path.relative_to(place.folder).parts:
                path = path / name
                inner = step_into(folder, name, path)
                os.close(folder)
                folder = inner
        except OSError as error:
            raise refusal(error, path) from None
        finally:
            os.close(folder)
    return {}


def do_delete_file(principal, uri, recursive=False):
    place = allowed_place(principal, uri, "session:folders")
    if place.path == place.folder:
        raise Refused(f"{place.path} is a session's working directory; end the session instead.", "conflict")
    with place.hands() as hands:
        status = hands.stat(place.path)
        if status is None:
            raise not_found(f"No file {place.path}.")
        with held(hands, place.path) as (parent, name):
            if not stat.S_ISDIR(status.st_mode):
                os.unlink(name, dir_fd=parent)
            elif recursive:
                remove_tree(parent, name)
            else:
                try:
                    os.rmdir(name, dir_fd=parent)
                except OSError as error:
                    if error.errno != errno.ENOTEMPTY:
                        raise
                    raise Refused(f"{place.path} is not empty; delete it with recursive.", "conflict") from None
    return {}


def checked_pair(principal, source, destination, move, fail_if_exists):
    """(source Place, destination Place) for resourceCopy and resourceMove: the source readable
    (changeable, for a move), the destination changeable."""
    src = allowed_place(principal, source, "session:folders" if move else "session:read")
    dst = allowed_place(principal, destination, "session:folders")
    if move and src.path == src.folder:
        raise Refused(f"{src.path} is a session's working directory; it stays where the session has it.",
                      "conflict")
    if dst.path == src.path or is_within(dst.path, src.path):
        raise Refused(f"{dst.path} is {src.path} or inside it.", "conflict")
    return src, dst


def copy_entry(source_folder, name, target_folder, target_name, fail_if_exists, shown):
    """Copy `name` into `target_name`, by descriptors: a folder with all in it, a link as a link
    (following one would bring in what lies outside the folders)."""
    status = os.stat(name, dir_fd=source_folder, follow_symlinks=False)
    if stat.S_ISLNK(status.st_mode):
        os.symlink(os.readlink(name, dir_fd=source_folder), target_name, dir_fd=target_folder)
    elif stat.S_ISDIR(status.st_mode):
        try:
            os.mkdir(target_name, 0o2775, dir_fd=target_folder)
        except FileExistsError:
            if fail_if_exists:
                raise
        inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=source_folder)
        into = os.open(target_name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=target_folder)
        try:
            for entry in os.scandir(inner):
                copy_entry(inner, entry.name, into, entry.name, fail_if_exists, os.path.join(shown, entry.name))
        finally:
            os.close(inner)
            os.close(into)
    elif stat.S_ISREG(status.st_mode):
        reading = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=source_folder)
        try:
            writing = open_for_writing(target_folder, target_name, shown, fail_if_exists)
        except BaseException:
            os.close(reading)
            raise
        try:
            while chunk := os.read(reading, COPY_CHUNK):
                os.write(writing, chunk)
        finally:
            os.close(reading)
            os.close(writing)
    # anything else (a device, a fifo) is not copied


def do_copy_file(principal, source, destination, fail_if_exists=False):
    src, dst = checked_pair(principal, source, destination, False, fail_if_exists)
    with src.hands() as hands:
        if hands.stat(src.path) is None:
            raise not_found(f"No file {src.path}.")
        source_folder, name = hands.parent(src.path)
    try:
        with dst.hands() as hands:
            if fail_if_exists and hands.stat(dst.path) is not None:
                raise Refused(f"{dst.path} already exists.", "exists")
            with held(hands, dst.path) as (target_folder, target_name):
                try:
                    copy_entry(source_folder, name, target_folder, target_name, fail_if_exists, str(dst.path))
                except FileExistsError:
                    raise Refused(f"{dst.path} already exists.", "exists") from None
    finally:
        os.close(source_folder)
    return {}


def do_move_file(principal, source, destination, fail_if_exists=False):
    src, dst = checked_pair(principal, source, destination, True, fail_if_exists)
    with src.hands() as hands:
        if hands.stat(src.path) is None:
            raise not_found(f"No file {src.path}.")
        target = hands.stat(dst.path)
        if target is not None and fail_if_exists:
            raise Refused(f"{dst.path} already exists.", "exists")
        if target is not None and stat.S_ISDIR(target.st_mode):
            raise Refused(f"{dst.path} is a folder; this host moves onto a file or a new name only.", "conflict")
        with held(hands, src.path) as (source_folder, name), held(hands, dst.path) as (target_folder, target_name):
            os.rename(name, target_name, src_dir_fd=source_folder, dst_dir_fd=target_folder)
    return {}


def request_access(principal, uri, read, write):
    """resourceRequest: granted ({}) only when the caller already holds what it asks (a request
    with neither flag asks to read); this host prompts no one, so access is never widened."""
    grants = (["session:read"] if read or not write else []) + (["session:folders"] if write else [])
    for grant in grants:
        allowed_place(principal, uri, grant)
    return {}
