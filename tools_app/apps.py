import logging

from django.apps import AppConfig

logger = logging.getLogger(__name__)


class ToolsAppConfig(AppConfig):
    name = "tools_app"
    verbose_name = "Tools"

    def ready(self):
        from celery.signals import worker_ready

        from .families.agent_merge.tools import AGENT_MERGE_TOOLS
        from .families.artifacts.tools import ARTIFACT_TOOLS
        from .families.comments.tools import COMMENT_TOOLS
        from .families.resources import RESOURCE_TOOLS
        from .families.session import register_session_tools
        from .families.terminals import TERMINAL_TOOLS
        from .families.wakeups.tasks import fire_wakeups_at_start_in_background
        from .families.wakeups.tools import WAKEUP_TOOLS
        from .host_tools import REGISTRY, register_host_tools

        # Before the live refresh hook: at start there is nobody to tell.
        register_session_tools()
        register_host_tools(*ARTIFACT_TOOLS, *COMMENT_TOOLS, *RESOURCE_TOOLS, *TERMINAL_TOOLS, *WAKEUP_TOOLS,
                            *AGENT_MERGE_TOOLS)
        REGISTRY.on_change(refresh_after_registry_change)
        # A worker's start fires what fell due while the host was down, and what was refused.
        worker_ready.connect(fire_wakeups_at_start_in_background, weak=False)


def refresh_after_registry_change(registry):
    """A registration, reload or dispose reaches every running session's serverTools."""
    from .live import refresh_live_sessions

    try:
        refresh_live_sessions()
    except Exception:
        # At import time (no database yet) there is no running session to tell.
        logger.warning("Skipped the serverTools refresh after a registry change", exc_info=True)
