import logging

from django.apps import AppConfig

logger = logging.getLogger(__name__)


class ToolsAppConfig(AppConfig):
    name = "tools_app"
    verbose_name = "Tools"

    def ready(self):
        from .host_tools import REGISTRY

        from .session_tools import register_session_tools

        register_session_tools()  # before the live refresh hook: at start there is nobody to tell
        REGISTRY.on_change(refresh_after_registry_change)


def refresh_after_registry_change(registry):
    """A registration, reload or dispose reaches every running session's serverTools."""
    from .live import refresh_live_sessions

    try:
        refresh_live_sessions()
    except Exception:
        # At import time (no database yet) there is no running session to tell.
        logger.warning("Skipped the serverTools refresh after a registry change", exc_info=True)
