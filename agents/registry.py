"""The agents this host offers, by provider id, built once at start from one listed tuple."""
from .providers.acp import AcpProvider
from .providers.claude import ClaudeProvider
from .providers.echo import EchoProvider
from .providers.github_copilot import GitHubCopilotProvider

# In the order clients list them; the first is the default agent.
PROVIDER_CLASSES = (EchoProvider, AcpProvider, GitHubCopilotProvider, ClaudeProvider)

PROVIDERS = {}


def build():
    PROVIDERS.clear()
    PROVIDERS.update((provider.id, provider) for provider in (cls() for cls in PROVIDER_CLASSES))


def get_provider(provider_id):
    return PROVIDERS.get(provider_id)


def agent_infos():
    """The root state's `agents`."""
    return [provider.agent_info() for provider in PROVIDERS.values()]


def provider_choices():
    """(id, label) pairs of the providers this host runs, for a form's choices."""
    return [(provider_id, provider_id) for provider_id in PROVIDERS]
