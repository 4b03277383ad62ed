from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from .rules import parse_rule


class OutboundAllow(models.Model):
    """A destination the operator allows the host to reach for every tenant although it is a
    private address (AHP_OUTBOUND_ALLOW is the same list from the environment). Host-wide:
    only a superuser sees or edits it."""

    entry = models.CharField(max_length=255, unique=True,
                             help_text="A host name (mcp.internal) or a CIDR (10.0.0.0/8, 127.0.0.1/32).")
    note = models.CharField(max_length=200, blank=True, help_text="Why it is allowed.")
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "outbound allow-list entry"
        verbose_name_plural = "outbound allow-list"

    def __str__(self) -> str:
        return self.entry

    def clean(self) -> None:
        try:
            parse_rule(self.entry)
        except ValueError as invalid:
            raise ValidationError({"entry": str(invalid)}) from None


class TenantGroup(models.Model):
    """A tenant's group id, the same on every node: its folders (on a volume every node mounts)
    stay its group's whichever node's sandbox writes them. A number of AHP_SANDBOX_IDS."""

    tenant_id = models.BigIntegerField(primary_key=True)
    gid = models.IntegerField(unique=True)

    def __str__(self) -> str:
        return f"tenant {self.tenant_id}: group {self.gid}"


class SecretsKeyCheck(models.Model):
    """One value sealed with the host's AHP_SECRETS_KEY by the first node that starts: a node
    whose key cannot open it refuses to start (sandbox.sealing.key_refusal), before it seals
    anything the other nodes could not open."""

    sealed = models.TextField()

    def __str__(self) -> str:
        return "secrets key check"


class SandboxUser(models.Model):
    """A sandbox's user id, the same on every node: the owner of its home on the volume every
    node mounts, so a session re-homed on another node runs as the user its files belong to.
    A number of AHP_SANDBOX_IDS, freed when the sandbox ends."""

    key = models.CharField(max_length=200, primary_key=True)
    uid = models.IntegerField(unique=True)

    def __str__(self) -> str:
        return f"sandbox {self.key}: user {self.uid}"
