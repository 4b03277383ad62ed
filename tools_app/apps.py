import logging

from django.apps import AppConfig

from .catalog.registry import ToolRegistry

logger = logging.getLogger(__name__)


class ToolsAppConfig(AppConfig):
    name = "tools_app"
    verbose_name = "Tools"

    def ready(self) -> None:
        from celery.signals import worker_ready

        from .catalog.host_tools import REGISTRY, build_host_tools
        from .families.agent_merge.tools import AGENT_MERGE_TOOLS
        from .families.artifacts.tools import ARTIFACT_TOOLS
        from .families.comments.tools import COMMENT_TOOLS
        from .families.computers.tools import register_computer_plugin
        from .families.resources import RESOURCE_TOOLS
        from .families.session import SESSION_TOOLS
        from .families.terminals import TERMINAL_TOOLS
        from .families.wakeups.tasks import fire_wakeups_at_start_in_background
        from .families.wakeups.tools import WAKEUP_TOOLS
        from .runtime.turns import launch_turn
        from .turn_launcher import set_turn_launcher

        # The host's own tools, in the order the model sees them (the Tools page's): the families,
        # Agent Merge's among them, then the host's own three (ahp_resource, ahp_terminals,
        # schedule_wakeup).
        build_host_tools((*SESSION_TOOLS, *ARTIFACT_TOOLS, *COMMENT_TOOLS, *AGENT_MERGE_TOOLS, *RESOURCE_TOOLS,
                          *TERMINAL_TOOLS, *WAKEUP_TOOLS))
        register_computer_plugin(REGISTRY)
        # The families start the turns they begin through this hook: they cannot import the runtime.
        set_turn_launcher(launch_turn)
        # Only changes after start reach running sessions: while apps load there is no session
        # to tell, and the database must not be touched (it may not even have its tables yet).
        REGISTRY.on_change(refresh_after_registry_change)
        # A worker's start fires what fell due while the host was down, and what was refused.
        worker_ready.connect(fire_wakeups_at_start_in_background, weak=False)


def refresh_after_registry_change(registry: ToolRegistry) -> None:
    """A registration, reload or dispose reaches every running session's serverTools."""
    from .live import refresh_live_sessions

    try:
        refresh_live_sessions()
    except Exception:
        # A process without a usable database (a tool script, a test without one) has no
        # running session to tell; the change itself stands.
        logger.warning("Skipped the serverTools refresh after a registry change", exc_info=True)
