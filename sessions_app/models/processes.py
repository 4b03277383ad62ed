"""Who is alive and where: host processes and their leases, the process a session lives in, and
the sockets each process holds open."""
import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone

from grants.models import Tenant, TenantScopedManager

from .sessions import Session


class HostProcess(models.Model):
    """A host process that runs turns or holds sockets and terminals, refreshing `seen` while it
    lives. What names a process whose row went stale (or never came) is that of a dead process:
    the sweep ends its turns and terminals."""

    name = models.CharField(max_length=64, primary_key=True)
    seen = models.DateTimeField(default=timezone.now, db_index=True)
    node = models.CharField(max_length=64, blank=True, help_text="The node (machine) the process runs on.")

    def __str__(self) -> str:
        return f"{self.name} on {self.node or 'a node'} at {self.seen:%Y-%m-%d %H:%M:%S}"


class SessionHome(models.Model):
    """Where a session's files and processes are touched (its terminals, its turns' agents): one
    host process, on one node. Its lease is that process's HostProcess row; a home whose process
    stopped renewing it is taken by the next live process a request for the session reaches."""

    session = models.OneToOneField(Session, on_delete=models.CASCADE, primary_key=True, related_name="home")
    process = models.CharField(max_length=64)
    node = models.CharField(max_length=64, blank=True)
    since = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.session_id} at {self.process} on {self.node}"


class ClientConnection(models.Model):
    """One open WebSocket. Its process refreshes `seen`; a row not seen for a while belongs to
    a process that died, and the sweep treats it as closed."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    client_id = models.CharField(max_length=128, blank=True)
    person = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                               related_name="+", help_text="Whose token opened it; empty for the tenant's root.")
    process = models.CharField(max_length=64)
    channel = models.CharField(max_length=200, blank=True,
                               help_text="Its socket's channel-layer channel: what the host asks the client goes there.")
    seen = models.DateTimeField(default=timezone.now)
    subscriptions = models.JSONField(default=list, blank=True)

    tenant_path = "tenant"
    objects = TenantScopedManager()

    class Meta:
        indexes = [models.Index(fields=["client_id"], name="connection_client"),
                   models.Index(fields=["seen"], name="connection_seen")]
