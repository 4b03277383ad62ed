"""What a warm harness is counted as holding against the node's memory bound
(AHP_HARNESS_WARM_MEMORY_MB): its whole process tree, the CLI below the sandbox's launchers."""
import os
import subprocess
import sys

from agents.warm import tree_memory

HELD = 64 * 1024 ** 2
# A launcher holding little that starts a process holding 64 MiB, as bubblewrap starts the CLI;
# the process ends when its standard input closes.
HOLDER = "data = b'x' * (64 * 1024 ** 2); print('held', flush=True); input()"
LAUNCHER = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {HOLDER!r}])"


def resident(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_a_harness_holds_the_memory_of_every_process_below_its_launcher():
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True)
    try:
        assert launcher.stdout is not None and launcher.stdout.readline() == "held\n"
        assert resident(launcher.pid) < HELD < tree_memory(launcher.pid)
    finally:
        launcher.communicate(timeout=30)  # its standard input closes: the holder ends, then the launcher


def test_a_harness_that_ended_holds_nothing():
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    assert tree_memory(ended.pid) == 0
