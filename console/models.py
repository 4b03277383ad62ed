from typing import ClassVar

from grants.models import TenantScopedManager
from sessions_app.models import ToolCall

from .audit import AuditQuerySet


class AuditManager(TenantScopedManager):
    """ToolCall's manager, whose querysets have the audit's queries (`with_outcome`)."""
    _queryset_class = AuditQuerySet


class AuditEntry(ToolCall):
    """A tool call seen as an audit line: who, where, which tool, what came of it. Nothing is
    stored twice; refusals are already calls completed with their sentence."""

    objects: ClassVar[AuditManager] = AuditManager()

    class Meta:
        proxy = True
        verbose_name = "audit entry"
        verbose_name_plural = "audit"
