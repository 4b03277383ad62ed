"""The computer plugin: `request_disposable_computer`, `run_in_computer`, `release_computer`.

A computer is a bubblewrap sandbox of its own (sandbox/bubblewrap.py): a writable root that is
nothing of the host's, read-only system programs, no network, and tight CPU, memory and time
limits. One per request; it is destroyed on release or when its session goes. The tools need
advanced permission: they are offered only under `advancedTools`."""
import json
import shutil
import subprocess

from kernel.ids import parse_uuid
from kernel.refusals import Refused
from sandbox.bubblewrap import HOME, Sandbox, SandboxUnavailable, end_sandbox, sandbox_root
from tools_app.catalog.registry import Tool

from . import actions
from .models import Computer

ROOT = HOME  # its writable root: the sandbox's own home, nothing of the host's
RUN_SECONDS = 60
# No process limit of its own: a process limit counts every process of the one sandbox user, so a
# lower one let any tenant's busy sandbox (a harness's threads count) stop a computer forking.
LIMITS = (("cpu", 60), ("as", 1024 * 1024 * 1024), ("fsize", 256 * 1024 * 1024))
OUTPUT_CHARS = 8000


def sandbox_of(computer):
    return Sandbox(computer.sandbox_key, limit_overrides=LIMITS)


def computer_of(context, arguments):
    computer_id = parse_uuid(arguments["computer"])
    computer = Computer.objects.filter(pk=computer_id, session=context.session).first() if computer_id else None
    if computer is None:
        raise Refused(f"No computer {arguments['computer']} in this session; request_disposable_computer makes one.",
                      "not_found")
    return computer


def request_disposable_computer(context, arguments):
    computer = actions.do_request_computer(context.principal, context.session)
    return json.dumps({"computer": str(computer.id), "root": ROOT})


def run_in_computer(context, arguments):
    computer = computer_of(context, arguments)
    try:
        done = sandbox_of(computer).run(["/bin/sh", "-c", arguments["command"]], cwd=ROOT, timeout=RUN_SECONDS)
    except subprocess.TimeoutExpired:
        raise Refused(f"The command ran past {RUN_SECONDS} s and was stopped.", "conflict") from None
    except SandboxUnavailable as unavailable:
        raise Refused(str(unavailable), "conflict") from None
    return json.dumps({"exitCode": done.returncode, "stdout": done.stdout[-OUTPUT_CHARS:],
                       "stderr": done.stderr[-OUTPUT_CHARS:]})


def release_computer(context, arguments):
    computer = computer_of(context, arguments)
    key = computer.sandbox_key
    actions.do_release_computer(context.principal, computer)
    end_sandbox(key)
    return json.dumps({"released": arguments["computer"]})


def end_session_computers(session_id):
    """The session went (its rows with it): every computer it had is destroyed."""
    for folder in sandbox_root().glob(f"computer-{session_id}-*"):
        end_sandbox(folder.name)
        shutil.rmtree(folder, ignore_errors=True)


COMPUTER_REF = {"type": "string", "description": "The computer id request_disposable_computer answered."}

COMPUTER_TOOLS = (
    Tool("request_disposable_computer", title="Request Disposable Computer",
         description=(f"Get a disposable computer: an empty writable root at {ROOT}, the system's programs, no "
                      "network, limited CPU, memory and time. Release it when done."),
         executor=request_disposable_computer, advanced_permission=True, effects=frozenset({"writes"}),
         source="plugin"),
    Tool("run_in_computer", title="Run in Computer",
         description="Run a shell command in a disposable computer; answers its exit code, stdout and stderr.",
         input_schema={"type": "object", "properties": {
             "computer": COMPUTER_REF, "command": {"type": "string", "minLength": 1, "description": "A sh command."}},
             "required": ["computer", "command"]},
         executor=run_in_computer, advanced_permission=True, effects=frozenset({"reads", "writes"}),
         source="plugin"),
    Tool("release_computer", title="Release Computer", description="Destroy a disposable computer and all it holds.",
         input_schema={"type": "object", "properties": {"computer": COMPUTER_REF}, "required": ["computer"]},
         executor=release_computer, advanced_permission=True, annotations={"destructiveHint": True},
         effects=frozenset({"writes", "destructive"}), source="plugin"),
)


def register_computer_plugin(registry):
    """The plugin registers its own transform, as any plugin may: its tools stay whatever the
    other plugins set."""
    def transform(editor):
        for tool in COMPUTER_TOOLS:
            editor.add(tool)

    return registry.register(transform, label="computer plugin")
