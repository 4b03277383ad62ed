"""Whether access may have changed since a socket last read its token and grants, so a socket
reads them again only then, not on every frame.

Every change that can end or change access counts one step here once it commits: the `do_*`
functions of grants.actions (a token revoked or deleted, a person deactivated, a membership
removed, a role given or redefined), and plain saves and deletes of people, tokens and
memberships (the admin, a shell), caught by their signals. A socket whose last reading differs
from `current()` reads again at its next frame.

Changes committed in other processes reach sockets through their token's and person's
channel-layer groups (grants.actions). The embedded host's in-memory layer reaches no other
process, so there each step is also marked in a file under VAR_DIR that all of the host's
processes read with one `stat` (no database hop): a `manage.py addmember --role guest` counts at
the serving process's next frame. The heartbeat re-reads the tokens of every socket of the
process (sessions_app.events.heartbeat) for what none of these reaches.
"""
import functools
import itertools
import logging
import os

from django.conf import settings

from kernel.after_commit import after_commit

logger = logging.getLogger(__name__)

_steps = itertools.count(1)
_current = 0
# The marks file is emptied past this size; its modification time with its size tells a change.
MARKS_KEPT_BYTES = 4096


@functools.cache
def marks_path():
    """The file other processes of the embedded host mark their changes in; None with a shared
    channel layer, which carries the news itself."""
    return None if settings.REDIS_URL else settings.VAR_DIR / "access-changes"


def _marks():
    path = marks_path()
    if path is None:
        return None
    try:
        found = os.stat(path)
    except OSError:
        return None  # nothing marked yet
    return found.st_mtime_ns, found.st_size


def current():
    """The reading now: a socket keeps the one it took before its last reading of its access."""
    return _current, _marks()


def changed():
    """Access may have changed for some socket of this host: each re-reads at its next frame."""
    global _current
    _current = next(_steps)  # itertools.count is thread-safe: the ORM threads may both count
    path = marks_path()
    if path is None:
        return
    try:
        with open(path, "ab") as marks:
            if marks.tell() >= MARKS_KEPT_BYTES:
                marks.truncate(0)
            marks.write(b".")
    except OSError as exc:
        logger.warning("Could not mark an access change for the host's other processes (%s); "
                       "their sockets see it at their heartbeat", exc)


def changed_after_commit(**_signal):
    after_commit("marking sockets to re-read their access", changed)


def watch_access_rows():
    """Count plain saves and deletes of the rows a token's liveness and grants read."""
    from django.contrib.auth import get_user_model
    from django.db.models.signals import post_delete, post_save

    from .models import ApiToken, Membership, Role

    for model in (get_user_model(), ApiToken, Membership, Role):
        post_save.connect(changed_after_commit, sender=model, dispatch_uid=f"liveness-save-{model.__name__}")
        post_delete.connect(changed_after_commit, sender=model, dispatch_uid=f"liveness-delete-{model.__name__}")
