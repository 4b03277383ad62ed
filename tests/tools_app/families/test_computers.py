"""The computer plugin: disposable sandboxes a session runs commands in, offered only under
advancedTools, destroyed on release or with their session."""
import json
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from sandbox.bubblewrap import Sandbox, end_sandbox, sandbox_root
from tools_app.catalog.loader import catalog_for_chat
from tools_app.models import Computer, HostConfig

from .session.conftest import Place

COMPUTER_TOOLS = ["request_disposable_computer", "run_in_computer", "release_computer"]


@pytest.fixture
def place(acme):
    HostConfig.for_tenant(acme.tenant)
    HostConfig.objects.filter(tenant=acme.tenant).update(advanced_tools=True)
    return Place(acme)


def test_the_computer_tools_are_offered_only_under_advanced_tools(acme):
    place = Place(acme)
    assert not set(COMPUTER_TOOLS) & set(catalog_for_chat(place.chat).names)
    HostConfig.for_tenant(acme.tenant)
    HostConfig.objects.filter(tenant=acme.tenant).update(advanced_tools=True)
    snapshot = catalog_for_chat(place.chat)
    assert set(COMPUTER_TOOLS) <= set(snapshot.names)
    assert {snapshot.bindings[name].tool.source for name in COMPUTER_TOOLS} == {"plugin"}


def test_a_command_runs_in_a_computer_that_cannot_read_the_hosts_files(place, tmp_path, settings):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("the host's own")
    computer = place.call("request_disposable_computer")["computer"]
    ran = place.call("run_in_computer", computer=computer,
                     command=f"echo made > note && cat note && pwd && cat {secret}; ls {settings.VAR_DIR}")
    assert ran["stdout"].splitlines()[:2] == ["made", "/home/sandbox"]
    assert "the host's own" not in ran["stdout"]
    assert "No such file or directory" in ran["stderr"] and ran["exitCode"] != 0
    network = place.call("run_in_computer", computer=computer, command=(
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), 3)\" 2>&1 || echo offline"))
    assert network["stdout"].strip().endswith("offline")


def test_a_computer_forks_while_another_sandbox_of_the_host_runs_many_processes(place):
    """Every sandbox runs as the one sandbox user and a process limit counts all of that user's
    processes: a computer's own lower limit (64) made it fail to fork while another session's
    agent ran a harness with many threads."""
    neighbour = subprocess.Popen(Sandbox("a-busy-neighbour").argv(
        ["/bin/sh", "-c", "for i in $(seq 100); do sleep 60 & done; echo started; wait"]), stdout=subprocess.PIPE,
        text=True)
    try:
        assert neighbour.stdout.readline() == "started\n"
        computer = place.call("request_disposable_computer")["computer"]
        ran = place.call("run_in_computer", computer=computer, command="echo made > note && cat note")
        assert (ran["exitCode"], ran["stdout"], ran["stderr"]) == (0, "made\n", "")
    finally:
        neighbour.kill()  # its sandbox's processes end with it (--die-with-parent, a PID namespace)
        neighbour.wait()
        end_sandbox("a-busy-neighbour")


def test_a_released_computer_is_gone_with_all_it_held(place):
    computer = place.call("request_disposable_computer")["computer"]
    place.call("run_in_computer", computer=computer, command="echo kept > file")
    key = Computer.objects.get(pk=computer).sandbox_key
    home = Path(settings.AHP_WORKSPACE_ROOT) / ".homes" / key
    assert (home / "file").exists()
    assert place.call("release_computer", computer=computer) == {"released": computer}
    assert not (sandbox_root() / key).exists() and not Computer.objects.filter(pk=computer).exists()
    assert not home.exists()
    from kernel.refusals import Refused

    with pytest.raises(Refused) as refused:
        place.call("run_in_computer", computer=computer, command="cat file")
    assert refused.value.sentence == (
        f"No computer {computer} in this session; request_disposable_computer makes one.")


def test_each_request_is_a_computer_of_its_own_and_they_go_with_their_session(place):
    first = place.call("request_disposable_computer")["computer"]
    second = place.call("request_disposable_computer")["computer"]
    place.call("run_in_computer", computer=first, command="echo first > mine")
    assert json.dumps(place.call("run_in_computer", computer=second, command="ls")["stdout"]) == '""'
    keys = [c.sandbox_key for c in Computer.objects.filter(session=place.session)]
    session_id = place.session.id
    from tools_app.sessions import do_end_session, forget_session

    do_end_session(place.principal, place.session)
    assert all((sandbox_root() / key).exists() for key in keys) and not Computer.objects.exists()
    forget_session(session_id)  # what the end's commit runs
    assert not any((sandbox_root() / key).exists() for key in keys)
