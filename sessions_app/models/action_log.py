"""Each tenant's action counter and the log of its published actions, kept for replay."""
from django.db import models
from django.utils import timezone

from grants.models import Tenant, TenantScopedManager


class ServerSeq(models.Model):
    """One tenant's action counter. Locked while one of its actions is written, so the tenant's
    serverSeq is gap-free and a snapshot taken under the same lock is consistent with it; no
    tenant waits on another's."""

    tenant = models.OneToOneField(Tenant, on_delete=models.CASCADE, related_name="+")
    value = models.BigIntegerField(default=0)


class ActionLog(models.Model):
    """Every published action, kept (bounded, per tenant) so `reconnect` can replay what a client
    missed. `id` orders rows across tenants (this process's log tail); `seq` is the tenant's."""

    seq = models.BigIntegerField()
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    channel = models.CharField(max_length=200)
    envelope = models.JSONField()
    process = models.CharField(max_length=64, help_text="The process that published it.")
    created = models.DateTimeField(default=timezone.now)

    tenant_path = "tenant"
    objects = TenantScopedManager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tenant", "seq"], name="actionlog_tenant_seq")]
        indexes = [models.Index(fields=["tenant", "channel", "seq"], name="actionlog_tenant_channel_seq")]
