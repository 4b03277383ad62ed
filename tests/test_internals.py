"""The libraries whose internals the host patches, overrides or imports are pinned exactly, and
every process of the host refuses to start, saying which library moved what, when one is missing."""
import importlib.metadata
import subprocess
import sys

import pytest

from ahp.internals import (
    INTERNALS,
    Internal,
    Moved,
    normalized,
    patch,
    pinned_versions,
    refuse_to_start_if_moved,
    resolved,
)

from .conftest import PROCESS_DEADLINE_SECONDS, ROOT, child_env


def test_every_library_reached_into_is_pinned_exactly_to_the_installed_version():
    pins = pinned_versions()
    for library in {internal.library for internal in INTERNALS}:
        assert pins[normalized(library)] == importlib.metadata.version(library), library


def test_the_installed_libraries_hold_every_internal_the_host_reaches():
    refuse_to_start_if_moved()  # returns, rather than ending this process


def test_the_patching_code_may_patch_only_what_the_table_lists():
    with pytest.raises(LookupError) as refused:
        patch("daphne.server.Server.application_checker", None)
    assert str(refused.value) == ("daphne.server.Server.application_checker is not in ahp/internals.py's table: "
                                  "list it there, pinning its library.")


def test_an_attribute_the_library_no_longer_sets_on_its_instances_is_named():
    gone = Internal("twisted", "twisted.internet.abstract.FileDescriptor._tempDataLength", "reads", "ahp.serve",
                    set_by_library=True)
    with pytest.raises(Moved) as moved:
        resolved(gone)
    assert str(moved.value) == (
        "twisted 26.10.0 is pinned for ahp.serve, which reads twisted.internet.abstract.FileDescriptor._tempDataLength;"
        " the installed twisted has no _tempDataLength.")


def started_without(module, attribute, entry):
    """A host process started as production starts it, with `attribute` of `module` deleted first."""
    code = f"import {module}, runpy, sys; del {module}.{attribute}; {entry}"
    return subprocess.run([sys.executable, "-c", code], env=child_env(), cwd=ROOT, capture_output=True, text=True,
                          timeout=PROCESS_DEADLINE_SECONDS)


SERVE = "sys.argv = ['ahp.serve', '-b', '127.0.0.1', '-p', '0', 'ahp.asgi:application']; " \
        "runpy.run_module('ahp.serve', run_name='__main__', alter_sys=True)"
RUNHOST = "sys.argv = ['manage.py', 'runhost', '--port', '0']; runpy.run_path('manage.py', run_name='__main__')"
FRONT = "sys.argv = ['ahp.front', '-p', '0']; runpy.run_module('ahp.front', run_name='__main__', alter_sys=True)"
WORKER = "sys.argv = ['celery', '-A', 'ahp', 'worker', '--pool', 'solo']; " \
         "runpy.run_module('celery', run_name='__main__', alter_sys=True)"


@pytest.mark.e2e  # processes of their own
@pytest.mark.django_db
@pytest.mark.parametrize("module, attribute, entry, sentence", [
    ("twisted.web.http", "HTTPChannel.allContentReceived", SERVE,
     "twisted 26.10.0 is pinned for ahp.serve, which overrides twisted.web.http.HTTPChannel.allContentReceived; "
     "the installed twisted has no allContentReceived."),
    ("autobahn.websocket.protocol", "hltype", SERVE,  # patched as ahp.serve is imported, before its check runs
     "autobahn 26.11.1 is pinned for ahp.serve, which patches autobahn.websocket.protocol.hltype; "
     "the installed autobahn has no hltype."),
    ("claude_agent_sdk._internal.transport.subprocess_cli", "SubprocessCLITransport._build_command", RUNHOST,
     "claude-agent-sdk 0.2.190 is pinned for agents.providers.claude, which overrides "
     "claude_agent_sdk._internal.transport.subprocess_cli.SubprocessCLITransport._build_command; "
     "the installed claude-agent-sdk has no _build_command."),
    ("channels_redis.utils", "_wrap_close", FRONT,
     "channels-redis 4.3.0 is pinned for kernel.channel_layer, which imports channels_redis.utils._wrap_close; "
     "the installed channels-redis has no _wrap_close."),
    ("daphne.server", "Server.run", WORKER,
     "daphne 4.2.3 is pinned for ahp.serve, which overrides daphne.server.Server.run; "
     "the installed daphne has no run."),
], ids=["serve", "serve-at-import", "runhost", "front", "celery-worker"])
def test_a_process_refuses_to_start_naming_the_library_when_an_internal_moved(module, attribute, entry, sentence):
    done = started_without(module, attribute, entry)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == sentence
