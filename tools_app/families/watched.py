"""What a resource watch sees: the files and folders at and below a watched `file:` URI, listed
as the file commands read (tools_app.families.files): beneath the host's workspace root, by
descriptor, as the session's own identity, descending into no link."""
import os
import stat
from fnmatch import fnmatchcase

from .files import allowed_place, not_found, through_link

MAX_WATCHED = 10000  # entries one listing keeps: a watch over a larger tree sees its first ones


def matches(relative, patterns):
    """Whether a path relative to the watch's root matches one of its glob patterns (`**` and `*`
    both cross folders)."""
    return any(fnmatchcase(relative, pattern) or fnmatchcase(f"/{relative}", pattern) for pattern in patterns)


def signature(status):
    """What tells a change: a folder changes only by being replaced (its own mtime moves with each
    entry added or removed, which is reported for the entry)."""
    if stat.S_ISDIR(status.st_mode):
        return stat.S_IFMT(status.st_mode), status.st_ino
    return stat.S_IFMT(status.st_mode), status.st_ino, status.st_size, status.st_mtime_ns


def listing(principal, uri, recursive, excludes=(), includes=()):
    """{file URI: signature} of `uri` and its entries (and with `recursive` theirs, depth first),
    for a caller who may read it; a folder matching `excludes` is not entered."""
    place = allowed_place(principal, uri, "session:read")
    with place.hands() as hands:
        status = hands.stat(place.path)
        if status is None:
            raise not_found(f"No file {place.path}.")
        if stat.S_ISLNK(status.st_mode):
            raise through_link(place.path)
        seen = {place.path.as_uri(): signature(status)}
        if stat.S_ISDIR(status.st_mode):
            walk(hands.open(place.path, os.O_RDONLY | os.O_DIRECTORY), place.path, recursive, seen,
                 list(excludes), list(includes))
    return seen


def walk(root_fd, root, recursive, seen, excludes, includes):
    """Adds the entries below the folder open as `root_fd` (closed here) to `seen`."""
    stack = [(root_fd, "")]
    try:
        while stack and len(seen) < MAX_WATCHED:
            fd, relative = stack.pop()
            try:
                with os.scandir(fd) as entries:
                    found = sorted(((entry.name, entry.stat(follow_symlinks=False)) for entry in entries),
                                   reverse=True)
                for name, status in found:
                    path = f"{relative}/{name}" if relative else name
                    if matches(path, excludes):
                        continue
                    if not includes or matches(path, includes):
                        seen[(root / path).as_uri()] = signature(status)
                    if recursive and stat.S_ISDIR(status.st_mode) and len(seen) < MAX_WATCHED:
                        try:  # O_NOFOLLOW: a folder swapped for a link since it was listed is not entered
                            stack.append((os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd),
                                          path))
                        except OSError:
                            continue
            except OSError:  # a folder removed while it was read: its entries are gone
                continue
            finally:
                os.close(fd)
    finally:
        for fd, _ in stack:
            os.close(fd)


def changes(before, after):
    """ResourceChange items from one listing to the next, by URI."""
    items = [{"uri": uri, "type": "added"} for uri in after.keys() - before.keys()]
    items += [{"uri": uri, "type": "deleted"} for uri in before.keys() - after.keys()]
    items += [{"uri": uri, "type": "updated"} for uri in after.keys() & before.keys() if after[uri] != before[uri]]
    return sorted(items, key=lambda item: item["uri"])
