from django.db import models

from sessions_app.models import ToolCall

from .audit import AuditQuerySet


class AuditEntry(ToolCall):
    """A tool call seen as an audit line: who, where, which tool, what came of it. Nothing is
    stored twice; refusals are already calls completed with their sentence."""

    objects = models.Manager.from_queryset(AuditQuerySet)()

    class Meta:
        proxy = True
        verbose_name = "audit entry"
        verbose_name_plural = "audit"
