"""AHP actions and who hears them: numbering (`numbering`), the action log (`log`), delivery
through the channel layer (`delivery`), this process's sockets (`sockets`), what they missed
resent from the log (`catch_up`) and the duties that keep them alive (`heartbeat`). Callers
outside sessions_app use the names here."""
from .delivery import group_for, notification_frame, notify, wake
from .log import PROCESS, REJECTED_SEQ, envelope, prune_action_log, publish, publish_many
from .numbering import current_seq, snapshot_lock

__all__ = [
    "PROCESS", "REJECTED_SEQ", "current_seq", "envelope", "group_for", "notification_frame", "notify", "prune_action_log", "publish", "publish_many",
    "snapshot_lock", "wake",
]
