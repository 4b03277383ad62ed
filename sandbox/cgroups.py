"""A sandbox's memory in all: a control group of its own, where the host may make one.

Per-process limits (the bridge's RLIMITs) bound each process; a session runs many (a harness, its
tools, terminals), so its sum is bounded here: every process a launch starts joins the sandbox's
group before bubblewrap runs (the launch shell writes its own pid into the group's `cgroup.procs`,
as root, outside the tenant's reach), and the kernel ends what passes the limit. The cgroup v2
hierarchy is used when it offers the memory controller, else cgroup v1's memory hierarchy; a host
with neither (or that may not write there) runs with the per-process limits alone, and says so once.
"""
import logging
import os
from pathlib import Path

from django.conf import settings

logger = logging.getLogger(__name__)

V2 = Path("/sys/fs/cgroup")
V1_MEMORY = Path("/sys/fs/cgroup/memory")
PARENT = "ahp-sandboxes"
_warned: list[OSError] = []


def hierarchy() -> tuple[Path, str] | None:
    """(folder sandboxes' groups go in, its memory limit file's name), or None."""
    if "memory" in _read(V2 / "cgroup.controllers").split():
        return V2 / PARENT, "memory.max"
    if (V1_MEMORY / "memory.limit_in_bytes").exists():
        return V1_MEMORY / PARENT, "memory.limit_in_bytes"
    return None


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def group_for(key: str) -> Path | None:
    """The `cgroup.procs` file of sandbox `key`'s group, made with its limit; None where the host
    cannot make one."""
    limit = settings.AHP_SANDBOX_SESSION_MEMORY_MB
    found = hierarchy() if os.geteuid() == 0 and limit else None
    if found is None:
        return None
    parent, limit_file = found
    group = parent / key
    try:
        if parent.parent == V2 and not parent.exists():
            parent.mkdir()
            (V2 / "cgroup.subtree_control").write_text("+memory")
            (parent / "cgroup.subtree_control").write_text("+memory")
        group.mkdir(parents=True, exist_ok=True)
        (group / limit_file).write_text(str(limit * 1024 * 1024))
    except OSError as error:
        if not _warned:
            _warned.append(error)
            logger.warning("Sandboxes run without a memory limit in all (%s: %s); each process keeps its own.",
                           group, error.strerror)
        return None
    return group / "cgroup.procs"


def remove_group(key: str) -> None:
    """Sandbox `key`'s group, gone (its processes were killed before)."""
    found = hierarchy()
    if found is not None:
        try:
            (found[0] / key).rmdir()
        except OSError:
            pass  # never made, or a process still leaving: the kernel frees an empty group's memory anyway
