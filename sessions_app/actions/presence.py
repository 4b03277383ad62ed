"""The presence of connections: a process holding sockets marks its own as still alive."""
from django.utils import timezone

from ..models import ClientConnection


def do_mark_connections_seen(process, connection_ids):
    """Refresh `seen` on `process`'s rows of the sockets still open there, so the sweep tells a
    live process from a dead one. Publishes nothing."""
    return ClientConnection.objects.filter(process=process, id__in=connection_ids).update(seen=timezone.now())
