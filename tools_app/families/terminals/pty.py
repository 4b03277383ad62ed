"""The PTYs behind this process's terminals: a shell (`/bin/sh -i`) started in the session's
sandbox on a pseudo-terminal, its output turned into terminal/data in order, its end into
terminal/exited."""
import asyncio
import codecs
import dataclasses
import fcntl
import logging
import os
import struct
import subprocess
import termios
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from channels.db import database_sync_to_async

from sandbox.bubblewrap import session_sandbox
from sandbox.workspaces import is_within

from . import actions

logger = logging.getLogger(__name__)
SHELL = ("/bin/sh", "-i")
RUNNING: dict[Any, "Pty"] = {}  # terminal id -> Pty, in this process


def set_size(fd, cols, rows):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Pty:
    def __init__(self, terminal_id, master, process):
        self.terminal_id = terminal_id
        self.master = master
        self.process = process
        self.chunks = asyncio.Queue()
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def readable(self):
        try:
            data = os.read(self.master, 65536)
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(self.master)
        self.chunks.put_nowait(data)

    async def forward(self):
        """Output in order, one database hop per chunk; at the end, the exit code."""
        while data := await self.chunks.get():
            text = self.decoder.decode(data)
            if text:
                await database_sync_to_async(actions.do_terminal_output)(self.terminal_id, text)
        code = await asyncio.get_running_loop().run_in_executor(None, self.process.wait)
        os.close(self.master)
        RUNNING.pop(self.terminal_id, None)
        await database_sync_to_async(actions.do_terminal_exited)(self.terminal_id, code)

    def write(self, data):
        os.write(self.master, data.encode())

    def resize(self, cols, rows):
        set_size(self.master, cols, rows)

    def end(self):
        self.process.kill()


def open_pty(terminal):
    """Start `terminal`'s shell in its session's sandbox: nothing of the tenant's runs on the
    host as the host."""
    sandbox, cwd = session_sandbox(terminal.session), os.path.normpath(actions.folder_path(terminal.cwd))
    if not any(is_within(Path(cwd), Path(folder)) for folder in sandbox.writable):
        # The session's own folder (it has no working directory): bound like one.
        sandbox = dataclasses.replace(sandbox, writable=(*sandbox.writable, cwd))
    argv = sandbox.argv(list(SHELL), env={"TERM": "xterm-256color"}, cwd=cwd)
    master, slave = os.openpty()
    set_size(master, terminal.cols, terminal.rows)
    try:
        process = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                                   start_new_session=True)
    finally:
        os.close(slave)
    return Pty(terminal.id, master, process)


async def start(terminal):
    pty = await database_sync_to_async(open_pty)(terminal)
    RUNNING[terminal.id] = pty
    loop = asyncio.get_running_loop()
    loop.add_reader(pty.master, pty.readable)
    loop.create_task(pty.forward())


def running(terminal_id):
    return RUNNING.get(terminal_id)


def end_shells(terminal_ids: Iterable[uuid.UUID]) -> None:
    """The shells of these terminals that this process runs end."""
    for terminal_id in terminal_ids:
        if (shell := RUNNING.get(terminal_id)) is not None:
            shell.end()
