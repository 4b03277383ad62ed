"""A host tool's over-long output is cut before the model sees it; the whole text stays readable."""
import json

from rest_framework.test import APIClient

from tools_app.catalog.host_tools import PLUGINS
from tools_app.catalog.registry import Tool
from tools_app.models import FullToolOutput

from ...ahp.protocol.harness import AhpClient, default_chat


def fetch(token, call_id):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.get(f"/api/v1/tool-outputs/{call_id}")
    return response.status_code, response.content.decode()


LONG = "\n".join(f"line {i}" for i in range(2500))


def test_a_long_result_is_cut_and_the_whole_text_is_kept_for_its_readers(acme, globex, host):
    PLUGINS.set_tools([Tool("dump", executor=lambda call, args: LONG)])
    try:
        with AhpClient(host.port, acme.tokens["member"]) as alice:
            chat = default_chat(alice, alice.create_session())
            alice.subscribe(chat)
            turn = alice.start_turn(chat, "/call dump {}")
            call_id = alice.action("chat/toolCallStart", turnId=turn)["action"]["toolCallId"]
            reply = alice.reply_to(turn)
            assert reply.startswith("line 0\n") and "line 2000" not in reply
            assert reply.endswith(f"The full output is at ahp-tool-output:/{call_id}.]")
            assert FullToolOutput.objects.get(call_id=call_id).text == LONG
            assert fetch(acme.tokens["guest"], call_id) == (200, LONG)
            assert fetch(globex.tokens["root"], call_id)[0] == 404
            # The model may read it back too, itself cut to the same bounds.
            uri = json.dumps({"uri": f"ahp-tool-output:/{call_id}"})
            assert alice.reply_to(alice.start_turn(chat, f"/call ahp_resource {uri}")).startswith("line 0\n")
    finally:
        PLUGINS.set_tools([])
