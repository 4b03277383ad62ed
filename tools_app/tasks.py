"""The tool families' Celery tasks, found here by the worker's autodiscovery."""
from .families.agent_merge.tasks import sweep_deferred_reruns
from .families.terminals.tasks import sweep_orphaned_terminals
from .families.wakeups.tasks import fire_wakeup, sweep_wakeups

__all__ = ["fire_wakeup", "sweep_deferred_reruns", "sweep_orphaned_terminals", "sweep_wakeups"]
