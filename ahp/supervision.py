"""Child processes started again when they die: runhost's (the serving tier, the Celery worker,
beat) and the front's serving processes. A child that dies is started again after a pause that
grows while it keeps dying, and the event logged."""
import os
import signal
import subprocess
import time
from dataclasses import dataclass

# A child that died waits this long before it starts again, doubling while it keeps dying soon
# after its start; one that ran STEADY_SECONDS starts again at once the next time.
FIRST_RESTART_SECONDS = 1.0
LONGEST_RESTART_SECONDS = 30.0
STEADY_SECONDS = 60.0
# How long the children have to stop, together, before those still running are killed.
STOP_GRACE_SECONDS = 10.0


@dataclass
class Child:
    name: str
    argv: list
    process: subprocess.Popen | None = None
    started: float = 0.0
    pause: float = FIRST_RESTART_SECONDS
    due: float = 0.0  # when a dead child starts again

    def start(self):
        # A process group of its own: a terminal's Ctrl-C reaches only the supervisor, which passes
        # it on once, as it does a signal sent to the supervisor alone.
        self.process = subprocess.Popen(self.argv, process_group=0)
        self.started = time.monotonic()

    def running(self):
        return self.process is not None and self.process.poll() is None


def supervise_once(children, log):
    """Start again each child whose pause is over; note each that died. A child is started only
    after its previous process is known to have exited, so none ever runs twice."""
    now = time.monotonic()
    for child in children:
        if child.process is None:
            if now >= child.due:
                child.start()
                log(f"The {child.name} started again (pid {child.process.pid}).")
        elif child.process.poll() is not None:
            if now - child.started >= STEADY_SECONDS:
                child.pause = FIRST_RESTART_SECONDS
            log(f"The {child.name} exited with code {child.process.returncode}; "
                f"starting it again in {child.pause:g} s.")
            child.process, child.due = None, now + child.pause
            child.pause = min(child.pause * 2, LONGEST_RESTART_SECONDS)


def stop_children(running, signum=signal.SIGTERM):
    """Stop the children: `signum` (the interrupt or stop signal their supervisor got) to each,
    once. A child still running after the grace is killed."""
    for process in running:
        process.send_signal(signum)
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for process in running:
        if not reaped(process, deadline):
            process.kill()
            reaped(process, float("inf"))


def reaped(process, deadline):
    """Whether `process` exited by `deadline` (monotonic), waited for with waitpid itself: the
    interrupt that stops a supervisor may be raised inside Popen.poll between its lock's acquire
    and release, and Popen.wait would then wait on that lock for ever."""
    while process.returncode is None:
        try:
            pid, status = os.waitpid(process.pid, os.WNOHANG)
        except ChildProcessError:
            return True  # reaped already
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
        elif time.monotonic() >= deadline:
            return False
        else:
            time.sleep(0.05)
    return True
