"""Whether access may have ended since a socket last read its token's liveness, so a socket
reads it again only then, not on every frame.

Every change that can end access counts one step here once it commits in this process: the
`do_*` functions of grants.actions (a token revoked or deleted, a person deactivated, a
membership removed), and plain saves and deletes of people, tokens and memberships (the admin,
a shell), caught by their signals. A socket of this process whose last reading is older than the
count reads again at its next frame. Changes committed in other processes reach sockets through
their token's and person's channel-layer groups (grants.actions), and the heartbeat re-reads the
tokens of every socket of the process (sessions_app.events.presence) for what neither reaches.
"""
import itertools

from kernel.after_commit import after_commit


_steps = itertools.count(1)
_current = 0


def current():
    """The count now: a socket keeps the value it read before its last liveness reading."""
    return _current


def changed():
    """Access may have ended for some socket of this process: each re-reads at its next frame."""
    global _current
    _current = next(_steps)  # itertools.count is thread-safe: the ORM threads may both count


def changed_after_commit(**_signal):
    after_commit("marking sockets to re-read their tokens", changed)


def watch_access_rows():
    """Count plain saves and deletes of the rows a token's liveness reads."""
    from django.contrib.auth import get_user_model
    from django.db.models.signals import post_delete, post_save

    from .models import ApiToken, Membership

    for model in (get_user_model(), ApiToken, Membership):
        post_save.connect(changed_after_commit, sender=model, dispatch_uid=f"liveness-save-{model.__name__}")
        post_delete.connect(changed_after_commit, sender=model, dispatch_uid=f"liveness-delete-{model.__name__}")
