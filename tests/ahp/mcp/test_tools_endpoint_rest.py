"""GET /api/v1/sessions/<uuid>/tools-endpoint: the endpoint's url and token for session:write."""
from sessions_app.models import ToolsEndpoint

from ...ahp.protocol.harness import AhpClient
from .helpers import tools_endpoint, with_mcp


def test_it_answers_the_url_and_token_to_a_holder_of_session_write(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session()
        response = tools_endpoint(host.port, acme.tokens["member"], session)
        assert response.status_code == 200
        body = response.json()
        session_id = session.split("/")[-1]
        assert set(body) == {"url", "token"}
        assert body["url"] == f"http://127.0.0.1:{host.port}/ahp-mcp/{session_id}"
        row = ToolsEndpoint.objects.get(session_id=session_id)
        assert row.api_token.name == "acme-member"
        assert body["token"] not in (row.token_sha256, row.nonce) and row.accepts(body["token"])
        # Asking again answers the same token; every other holder gets one of their own.
        assert tools_endpoint(host.port, acme.tokens["member"], session).json() == body
        others = {tools_endpoint(host.port, acme.tokens[who], session).json()["token"] for who in ("admin", "root")}
        assert len(others) == 2 and body["token"] not in others
        assert ToolsEndpoint.objects.filter(session_id=session_id).count() == 3
        assert with_mcp(body["url"], body["token"], lambda s: s.list_tools()).tools is not None


def test_it_refuses_a_holder_of_session_read_only(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session()
        response = tools_endpoint(host.port, acme.tokens["guest"], session)
        assert response.status_code == 403
        assert response.json() == {"detail": "acme-guest may not session:write here"}
        assert not ToolsEndpoint.objects.exists()


def test_another_tenants_session_is_not_found(acme, globex, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session()
        assert tools_endpoint(host.port, globex.tokens["root"], session).status_code == 404
        assert tools_endpoint(host.port, acme.tokens["member"], "ahp-session:/00000000-0000-0000-0000-000000000000").status_code == 404


def test_it_needs_a_token(acme, host):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        session = alice.create_session()
        import httpx

        url = f"http://127.0.0.1:{host.port}/api/v1/sessions/{session.split('/')[-1]}/tools-endpoint"
        assert httpx.get(url).status_code == 401
