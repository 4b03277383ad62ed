"""authenticate: a fresh token pushed on an open connection; the connection then lives as long
as that token, and never changes person."""
import pytest

from grants.actions import do_mint_token, do_revoke_token

from .harness import AhpClient, RpcFailed
from .test_socket_lifetime import closed_code

ROOT = "ahp-root://"


def test_a_fresh_token_keeps_the_connection_when_the_old_one_is_revoked(acme, host):
    _, fresh = do_mint_token(acme.tenant, person=acme.member, name="member-fresh")
    with AhpClient(host.port, acme.tokens["member"], "member-client") as client:
        assert client.call("authenticate", {"channel": ROOT, "resource": "ahp-root://", "token": fresh}) == {}
        do_revoke_token(acme.tenant, "acme-member")
        assert client.call("ping", {"channel": ROOT}) is None
        do_revoke_token(acme.tenant, "member-fresh")
        assert closed_code(client, within=2) == 4401


@pytest.mark.parametrize("whose, code, message", [
    ("admin", -32009, "A connection acts as the person it opened as; open another to act as someone else."),
    ("globex", -32007, "That token does not authenticate with this host."),
    ("bogus", -32007, "That token does not authenticate with this host."),
])
def test_a_token_of_someone_else_or_nobody_is_refused(acme, globex, host, whose, code, message):
    token = {"admin": acme.tokens["admin"], "globex": globex.tokens["member"], "bogus": "ahp_nope_nope"}[whose]
    with AhpClient(host.port, acme.tokens["member"], "member-client") as client:
        with pytest.raises(RpcFailed) as failed:
            client.call("authenticate", {"channel": ROOT, "resource": "ahp-root://", "token": token})
        assert (failed.value.code, failed.value.message) == (code, message)
        if code == -32007:  # AuthRequiredErrorData: {resources: ProtectedResourceMetadata[]}
            assert failed.value.data == {"resources": [{
                "resource": "ahp-root://", "resource_name": "ahp-host API token",
                "bearer_methods_supported": ["header", "query"], "required": True}]}
        assert client.call("ping", {"channel": ROOT}) is None
