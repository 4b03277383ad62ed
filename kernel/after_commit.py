"""What runs once a change committed. The change is already the truth, so a hook that fails
(a bug, a layer or database that went away) must never turn it into an error answer for whoever
made it: the failure is logged with what it skipped, and the answer stays the commit's."""
import logging
from collections.abc import Callable

from django.db import transaction

logger = logging.getLogger(__name__)


def after_commit(what: str, hook: Callable[[], object]) -> None:
    """transaction.on_commit(hook); `what` names what is skipped if the hook fails."""
    def run() -> None:
        try:
            hook()
        except Exception:
            logger.exception("After a commit, %s was skipped: its hook failed", what)

    transaction.on_commit(run)
