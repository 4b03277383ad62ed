"""A session names a tenant's agent definition (createSession's and create_session's config):
one of another provider is refused with a sentence naming both."""
import pytest

from kernel.refusals import Refused
from sessions_app.models import Session
from tools_app.models import AgentDefinition

from ..ahp.protocol.harness import AhpClient, RpcFailed


@pytest.fixture
def reviewer(acme):
    return AgentDefinition.objects.create(tenant=acme.tenant, name="reviewer", provider="github-copilot",
                                          model="gpt-review", instructions="Review only.")


def test_create_session_names_a_definition_of_its_provider(acme, host, reviewer):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        uri = alice.create_session(provider="github-copilot", config={"agentDefinition": "reviewer"})
    assert Session.objects.get(id=uri.split("/")[-1]).config == {"agentDefinition": "reviewer"}


def test_create_session_refuses_a_definition_of_another_provider_naming_both(acme, host, reviewer):
    with AhpClient(host.port, acme.tokens["member"]) as alice:
        with pytest.raises(RpcFailed) as failed:
            alice.create_session(provider="claude", config={"agentDefinition": "reviewer"})
        with pytest.raises(RpcFailed) as missing:
            alice.create_session(provider="claude", config={"agentDefinition": "nobody"})
    assert failed.value.message == 'Agent definition "reviewer" runs on provider github-copilot, not on claude.'
    assert missing.value.message == 'No agent definition "nobody" in this tenant.'
    assert not Session.objects.filter(provider="claude").exists()


def test_the_create_session_tool_refuses_a_definition_of_another_provider(acme, place, reviewer):
    # echo needs no program of its own, so the tool offers it on any machine.
    with pytest.raises(Refused) as refused:
        place.call("create_session", relationship="independent", prompt="go", title="Child", agent="echo",
                   config={"agentDefinition": "reviewer"})
    assert refused.value.sentence == 'Agent definition "reviewer" runs on provider github-copilot, not on echo.'
    AgentDefinition.objects.create(tenant=acme.tenant, name="echoer", provider="echo")
    made = place.call("create_session", relationship="independent", prompt="go", title="Child",
                      agent="echo", config={"agentDefinition": "echoer"})
    assert Session.objects.get(id=made["session"].split("/")[-1]).config["agentDefinition"] == "echoer"
