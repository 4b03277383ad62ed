"""ahp_resource reads the host's own resources and asks a connected client for one it publishes;
ahp_terminals lists the terminals the host has open."""
import json
import time

from sessions_app.models import ClientConnection
from tools_app.client_requests import CLIENT_ANSWER_SECONDS

from ...ahp.protocol.harness import AhpClient
from ...reliability.fault_helpers import wait_until
from .helpers import Desk


def announce(ide, desk):
    """The client `ide` becomes the session's active client (it publishes resources)."""
    ide.subscribe(desk.session_uri)
    ide.dispatch(desk.session_uri, {"type": "session/activeClientSet",
                                    "activeClient": {"clientId": "ide", "tools": []}})
    ide.action("session/activeClientSet")


def test_it_reads_a_session_of_the_host(acme, host):
    with Desk(host, acme) as desk:
        state = json.loads(desk.call("ahp_resource", {"uri": desk.session_uri}))
        assert state["defaultChat"] == desk.chat_uri


def test_it_asks_the_client_that_publishes_a_resource_over_its_socket(acme, host):
    with Desk(host, acme) as desk, AhpClient(host.port, acme.tokens["member"], "ide") as ide:
        announce(ide, desk)
        turn = desk.start("ahp_resource", {"uri": "file:///work/README.md"})
        frame = ide.host_request("resourceRead")
        assert frame["params"] == {"channel": "ahp-root://", "uri": "file:///work/README.md"}
        ide.send({"jsonrpc": "2.0", "id": frame["id"], "result": {"data": "# Hello", "encoding": "utf-8"}})
        assert desk.client.reply_to(turn) == "# Hello"


def test_a_client_error_is_the_models_answer(acme, host):
    with Desk(host, acme) as desk, AhpClient(host.port, acme.tokens["member"], "ide") as ide:
        announce(ide, desk)
        turn = desk.start("ahp_resource", {"uri": "file:///nope"})
        frame = ide.host_request("resourceRead")
        ide.send({"jsonrpc": "2.0", "id": frame["id"], "error": {"code": -32008, "message": "No such file"}})
        assert desk.client.reply_to(turn) == "No resource file:///nope: ide answered: No such file."


def test_with_no_client_a_foreign_uri_is_refused(acme, host):
    with Desk(host, acme) as desk:
        assert desk.call("ahp_resource", {"uri": "file:///x"}) == (
            "No resource file:///x: it is not the host's, and no client of this session publishes resources.")


def test_another_tenants_session_is_not_there(acme, globex, host):
    with Desk(host, globex, client_id="g") as theirs, Desk(host, acme) as desk:
        assert desk.call("ahp_resource", {"uri": theirs.session_uri}) == f"No resource {theirs.session_uri} here."


def test_terminals_lists_none_on_a_host_without_terminals(acme, host):
    with Desk(host, acme) as desk:
        assert desk.call("ahp_terminals") == "No terminals are open on this host."


def test_terminals_lists_every_open_terminal_of_the_host_one_line_each(acme, globex, host):
    from tools_app.families.terminals.models import Terminal

    with Desk(host, globex, client_id="g") as theirs, Desk(host, acme) as desk, \
            Desk(host, acme, client_id="bob") as beside:
        mine = Terminal.objects.create(session=desk.session, title="build", cwd="file:///w/app", process="p")
        other = Terminal.objects.create(session=beside.session, title="", cwd="file:///w/api", process="p")
        Terminal.objects.create(session=desk.session, title="done", cwd="file:///w/app", process="p", exit_code=0)
        Terminal.objects.create(session=theirs.session, title="theirs", cwd="file:///g", process="p")
        assert desk.call("ahp_terminals") == (f"{mine.uri}\tbuild\tfile:///w/app\trunning\n"
                                              f"{other.uri}\t\tfile:///w/api\trunning")


def test_a_client_whose_socket_closed_is_not_asked_and_the_model_hears_why_at_once(acme, host):
    with Desk(host, acme) as desk:
        with AhpClient(host.port, acme.tokens["member"], "ide") as ide:
            announce(ide, desk)
        assert wait_until(lambda: not ClientConnection.objects.filter(client_id="ide").exists(), seconds=10)
        # Its place in the session is kept a while for it to come back; meanwhile nobody answers.
        started = time.monotonic()
        assert desk.call("ahp_resource", {"uri": "file:///x"}) == "No resource file:///x: ide is not connected."
        assert time.monotonic() - started < CLIENT_ANSWER_SECONDS
