"""The agents this host offers, by provider id, built once at start from one listed tuple."""
import uuid
from typing import TYPE_CHECKING, Protocol, TypedDict, runtime_checkable

from .providers.acp import AcpProvider
from .providers.claude import ClaudeProvider
from .providers.echo import EchoProvider
from .providers.github_copilot import GitHubCopilotProvider

if TYPE_CHECKING:
    from tools_app.runtime.toolbox import ChatToolbox


class ModelInfo(TypedDict):
    id: str
    provider: str
    name: str


class AgentInfo(TypedDict):
    """A provider as the root state's `agents` lists it."""

    provider: str
    displayName: str
    description: str
    models: list[ModelInfo]


class Provider(Protocol):
    """What every agent does; a harness provider also has `prepared`, `prewarm` and `runtime_missing`."""

    id: str

    def agent_info(self) -> AgentInfo: ...

    async def cancel(self, session_id: uuid.UUID) -> None: ...

    async def run_turn(self, text: str, toolbox: "ChatToolbox") -> str: ...


@runtime_checkable
class PrewarmingProvider(Provider, Protocol):
    """A provider that keeps a chat's harness warm, and starts a new session's before its first turn."""

    def runtime_missing(self) -> str | None: ...

    async def prewarm(self, toolbox: "ChatToolbox") -> None: ...


# In the order clients list them; the first is the default agent.
PROVIDER_CLASSES: tuple[type[Provider], ...] = (EchoProvider, AcpProvider, GitHubCopilotProvider, ClaudeProvider)

PROVIDERS: dict[str, Provider] = {}


def build() -> None:
    PROVIDERS.clear()
    PROVIDERS.update((provider.id, provider) for provider in (cls() for cls in PROVIDER_CLASSES))


def get_provider(provider_id: str) -> Provider | None:
    return PROVIDERS.get(provider_id)


def agent_infos() -> list[AgentInfo]:
    """The root state's `agents`."""
    return [provider.agent_info() for provider in PROVIDERS.values()]


def provider_choices() -> list[tuple[str, str]]:
    """(id, label) pairs of the providers this host runs, for a form's choices."""
    return [(provider_id, provider_id) for provider_id in PROVIDERS]
