from django.apps import AppConfig


class WorkbenchConfig(AppConfig):
    """The host's own tools beyond the session tools: artifacts, comments, resources and
    terminals, durable wakeups and Agent Merge."""

    name = "workbench"
    verbose_name = "Workbench tools"

    def ready(self):
        from celery.signals import worker_ready

        from tools_app.host_tools import register_host_tools

        from . import tasks, tools

        register_host_tools(*tools.ALL)
        # A worker's start fires what fell due while the host was down, and what was refused.
        worker_ready.connect(tasks.fire_wakeups_at_start_in_background, weak=False)
