"""What the machine did during a window: CPU of each process and of all cores, and the load
client's own share."""
import os
import resource
import time
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_ticks():
    """CPU ticks used so far by every process: pid -> (ticks, name)."""
    used = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        name = cmdline or stat[stat.index("(") + 1:stat.rindex(")")]
        used[int(entry.name)] = (int(fields[11]) + int(fields[12]), name)
    return used


def machine_busy():
    """(busy, total) ticks of all cores so far."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


class Usage:
    """CPU of each process and of the machine between `start` and `stop`."""

    def start(self):
        self.began, self.procs, self.machine = time.monotonic(), cpu_ticks(), machine_busy()
        self.client = resource.getrusage(resource.RUSAGE_SELF)

    def stop(self):
        self.elapsed = elapsed = time.monotonic() - self.began
        after, machine = cpu_ticks(), machine_busy()
        self.percent = {pid: (100 * (ticks - self.procs.get(pid, (0,))[0]) / CLOCK_TICKS / elapsed, name)
                        for pid, (ticks, name) in after.items()}
        busy, total = (b - a for a, b in zip(self.machine, machine, strict=True))
        self.machine_percent = 100 * busy / total if total else 0
        client = resource.getrusage(resource.RUSAGE_SELF)
        self.client_percent = 100 * ((client.ru_utime - self.client.ru_utime) +
                                     (client.ru_stime - self.client.ru_stime)) / elapsed
