"""Session lifecycle hooks: capture the tenant's MCP servers at start, forget them at the end."""
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from sandbox.bubblewrap import end_sandbox
from sessions_app.models import Session

from .actions import do_capture_mcp_servers


@receiver(post_save, sender=Session, dispatch_uid="mcp_app.capture_servers")
def capture_servers(sender, instance, created, raw=False, **kwargs):
    if not created or raw:
        return
    row = do_capture_mcp_servers(instance)
    if row.servers:
        from .server_tools import list_in_background

        transaction.on_commit(lambda: list_in_background(instance.id))


@receiver(post_delete, sender=Session, dispatch_uid="mcp_app.forget_servers")
def forget_servers(sender, instance, **kwargs):
    from sessions_app.providers import PROVIDERS

    from .server_tools import OFFERS

    session_id = instance.id

    def forget():
        OFFERS.forget_session(session_id)
        end_sandbox(session_id)
        acp = PROVIDERS.get("acp")
        if acp is not None and hasattr(acp, "forget"):
            acp.forget(session_id)

    transaction.on_commit(forget)
