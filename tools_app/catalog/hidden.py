"""What the catalog says about a tool it leaves out: the rule, as a sentence."""
from dataclasses import dataclass

# Why a tool is left out, as the explainer says it.
HIDDEN_BECAUSE = {
    "advanced": "{name} needs advanced permission, and advancedTools is off for this tenant.",
    "session_tools_off": "{name} is a session tool, and sessionTools is off for this tenant.",
    "provider_scoping": "{name} is a session tool, and sessionToolsProviders does not include this session's "
                        "provider {provider}.",
    "host_tools_off": "{name} is one of the host's own tools, and plugins.{provider}.hostTools is false for this "
                      "tenant.",
    "allowlist": "{name} is not among the tools the session's agent definition allows.",
    "permission_rule": "The agent's permission rules deny {action} on every resource, so {name} is left out.",
    "not_enabled": "{name} is not enabled for this session: its isEnabledForSession check said no.",
    "tool_chat": "{name} is only offered in chats a person started, and this chat was started by a tool.",
    "invalid": "{name} was left out because its definition is invalid: {problem}.",
}


@dataclass(frozen=True)
class HiddenTool:
    """A tool the snapshot does not offer, and the rule (a key of HIDDEN_BECAUSE) that hid it."""

    name: str
    source: str
    rule: str
    detail: str = ""  # the provider, permission action or definition problem the sentence names

    @property
    def reason(self) -> str:
        return HIDDEN_BECAUSE[self.rule].format(name=self.name, provider=self.detail, action=self.detail,
                                                problem=self.detail)
