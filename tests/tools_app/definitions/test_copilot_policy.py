import logging

import pytest
from copilot import BUILTIN_TOOLS_ISOLATED
from copilot._mode import _validate_tool_filter_list  # the check create_session/resume_session run

from tools_app.definitions.agent_definitions import AgentDefinitionInvalid
from tools_app.definitions.copilot_policy import (
    EMPTY_MODE_NEEDS_TOOLS,
    BuiltinToolsEntry,
    CopilotBuiltinToolPolicy,
    ToolSelector,
    builtin_tool_policy,
    resolve_builtin_tool_policy,
)

BUILTIN = "github-cli-builtin-tools"
ISOLATED = [f"builtin:{name}" for name in BUILTIN_TOOLS_ISOLATED]


def policy(**entry):
    """The policy of a definition whose tools[] holds this one entry (keys with dashes)."""
    entry = {key.replace("_", "-"): value for key, value in entry.items()}
    resolved = builtin_tool_policy({"name": "a", "provider": "github-copilot", "tools": [{"kind": BUILTIN, **entry}]})
    # Whatever the host produces must pass the SDK's own validation of filter lists.
    _validate_tool_filter_list("available_tools", resolved.available_tools)
    _validate_tool_filter_list("excluded_tools", resolved.excluded_tools)
    return resolved


def test_the_sole_wildcard_available_leaves_the_sdk_default():
    assert policy(available_tools={"tools": ["*"]}) == CopilotBuiltinToolPolicy(None, None, "copilot-cli")


def test_bare_available_names_govern_builtins_only():
    assert policy(available_tools={"tools": ["read_agent", "list_agents"]}).available_tools == [
        "builtin:read_agent", "builtin:list_agents", "custom:*", "mcp:*",
    ]


def test_isolated_available_is_the_sdks_isolated_set():
    assert "builtin:exit_plan_mode" in ISOLATED  # the SDK's set, not a list kept here
    assert policy(available_tools={"isolated": True}).available_tools == [*ISOLATED, "custom:*", "mcp:*"]


def test_an_empty_available_list_offers_no_builtin():
    assert policy(available_tools={"tools": []}).available_tools == ["custom:*", "mcp:*"]


def test_the_wildcard_excluded_removes_every_builtin():
    assert policy(excluded_tools={"tools": ["*"]}) == CopilotBuiltinToolPolicy(None, ["builtin:*"], "copilot-cli")


def test_isolated_excluded_removes_the_isolated_set():
    assert policy(excluded_tools={"isolated": True}).excluded_tools == ISOLATED


def test_a_bare_excluded_name_is_a_builtin():
    assert policy(excluded_tools={"tools": ["shell"]}).excluded_tools == ["builtin:shell"]


def test_isolated_available_with_one_exclusion():
    resolved = policy(available_tools={"isolated": True}, excluded_tools={"tools": ["exit_plan_mode"]})
    assert resolved.available_tools == [*ISOLATED, "custom:*", "mcp:*"]
    assert resolved.excluded_tools == ["builtin:exit_plan_mode"]


def test_the_mcp_only_allowlist_appends_nothing():
    assert policy(available_tools={"tools": ["mcp:*"]}) == CopilotBuiltinToolPolicy(["mcp:*"], None, "copilot-cli")


def test_the_deny_builtins_form():
    assert policy(excluded_tools={"tools": ["builtin:*"]}).excluded_tools == ["builtin:*"]


def test_the_locked_down_empty_mode_agent():
    assert policy(client_mode="empty", available_tools={"tools": ["mcp:*"]}) == (
        CopilotBuiltinToolPolicy(["mcp:*"], None, "empty")
    )


def test_a_mix_of_bare_and_qualified_names_appends_nothing():
    assert policy(available_tools={"tools": ["shell", "mcp:github-list_issues"]}).available_tools == [
        "builtin:shell", "mcp:github-list_issues",
    ]


def test_an_empty_excluded_list_is_a_real_empty_list():
    assert policy(excluded_tools={"tools": []}).excluded_tools == []


def test_custom_and_builtin_qualified_names_pass_verbatim():
    assert policy(available_tools={"tools": ["custom:*", "builtin:view", "mcp:*"]}).available_tools == [
        "custom:*", "builtin:view", "mcp:*",
    ]


def test_an_absent_slot_leaves_its_field_unset():
    assert policy(available_tools={"tools": ["shell"]}).excluded_tools is None
    assert policy(excluded_tools={"tools": ["shell"]}).available_tools is None


def test_an_absent_entry_leaves_every_field_unset():
    assert builtin_tool_policy({"name": "a", "provider": "github-copilot", "tools": [{"kind": "web_request"}]}) == (
        CopilotBuiltinToolPolicy(None, None, "copilot-cli")
    )
    assert resolve_builtin_tool_policy(None) == CopilotBuiltinToolPolicy()


def test_the_sole_wildcard_in_empty_mode_names_every_source():
    # Empty mode has no default to fall back on; the SDK insists on a list there.
    assert policy(client_mode="empty", available_tools={"tools": ["*"]}).available_tools == [
        "builtin:*", "custom:*", "mcp:*",
    ]


def test_tools_wins_over_isolated_with_a_warning(caplog):
    entry = BuiltinToolsEntry(available=ToolSelector(tools=("shell",), isolated=True), pointer="/tools/0")
    with caplog.at_level(logging.WARNING, logger="tools_app.definitions.copilot_policy"):
        resolved = resolve_builtin_tool_policy(entry)
    assert resolved.available_tools == ["builtin:shell", "custom:*", "mcp:*"]
    assert caplog.messages == ["/tools/0/available-tools: both tools and isolated are set; tools wins."]


def test_an_empty_list_wins_over_isolated():
    entry = BuiltinToolsEntry(excluded=ToolSelector(tools=(), isolated=True))
    assert resolve_builtin_tool_policy(entry).excluded_tools == []


def test_the_interlock_holds_for_a_definition_that_bypassed_the_schema():
    for available in (None, ToolSelector(tools=()), ToolSelector()):
        entry = BuiltinToolsEntry(available=available, client_mode="empty", pointer="/tools/3")
        with pytest.raises(AgentDefinitionInvalid) as caught:
            resolve_builtin_tool_policy(entry)
        assert str(caught.value) == f"/tools/3/available-tools: {EMPTY_MODE_NEEDS_TOOLS}"
    assert EMPTY_MODE_NEEDS_TOOLS == (
        "client-mode empty needs a non-empty available-tools: an empty-mode Copilot client offers no tool "
        "the definition does not name."
    )


def test_a_name_the_sdk_refuses_never_reaches_it():
    entry = BuiltinToolsEntry(excluded=ToolSelector(tools=("mcp:bad name",)), pointer="/tools/0")
    with pytest.raises(AgentDefinitionInvalid) as caught:
        resolve_builtin_tool_policy(entry)
    assert str(caught.value) == (
        "/tools/0/excluded-tools: invalid mcp tool name 'bad name': tool names must match "
        "/^[a-zA-Z0-9_-]+$/ or be the wildcard '*'"
    )


def test_the_sdk_itself_refuses_a_bare_wildcard():
    # Why every "*" is qualified before it leaves the host.
    with pytest.raises(ValueError):
        _validate_tool_filter_list("excluded_tools", ["*"])
