import json

import pytest

from tools_app.definitions.agent_definitions import (
    SCHEMA_PATH,
    AgentDefinitionInvalid,
    host_side_tools,
    validate_definition,
)
from tools_app.models import AgentDefinition

BUILTIN = "github-cli-builtin-tools"
NAME_PATTERN = "'^(\\\\*|[a-zA-Z0-9_-]+|(builtin|custom|mcp):(\\\\*|[a-zA-Z0-9_-]+))$'"


def definition(*tools):
    return {"name": "reviewer", "provider": "github-copilot", "tools": list(tools)}


def refusal(document):
    with pytest.raises(AgentDefinitionInvalid) as caught:
        validate_definition(document)
    return str(caught.value)


def test_it_accepts_every_form_of_the_builtin_tools_entry():
    for entry in (
        {"kind": BUILTIN},
        {"kind": BUILTIN, "available-tools": {"tools": ["*"]}},
        {"kind": BUILTIN, "available-tools": {"isolated": True}, "excluded-tools": {"tools": ["exit_plan_mode"]}},
        {"kind": BUILTIN, "available-tools": {"tools": []}, "excluded-tools": {"tools": []}},
        {"kind": BUILTIN, "available-tools": {"tools": ["shell", "mcp:github-list_issues", "custom:*", "builtin:*"]}},
        {"kind": BUILTIN, "client-mode": "copilot-cli"},
        {"kind": BUILTIN, "client-mode": "empty", "available-tools": {"tools": ["mcp:*"]}},
        {"kind": BUILTIN, "client-mode": "empty", "available-tools": {"isolated": True}},
    ):
        assert validate_definition(definition(entry)) == definition(entry)


def test_it_enforces_no_list_of_known_builtin_names():
    validate_definition(definition({"kind": BUILTIN, "excluded-tools": {"tools": ["a_tool_from_a_later_release"]}}))


def test_every_other_kind_validates_as_before():
    validate_definition(definition(
        {"kind": "mcp", "serverName": "github", "allowedTools": ["list_issues"]},
        {"kind": "agent-definition", "agent": "summariser"},
        {"kind": "web_request", "name": "web_request", "anything": {"goes": [1, 2]}},
        {"kind": "mcp"},  # a malformed MCP entry still falls to the generic tool, as before
    ))


def test_the_typed_kind_comes_first_and_the_generic_tool_excludes_it():
    schema = json.loads(SCHEMA_PATH.read_text())
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$defs"]["tool"]["anyOf"][0] == {"$ref": "#/$defs/githubCliBuiltinTools"}
    assert schema["$defs"]["genericTool"]["not"] == {"required": ["kind"], "properties": {"kind": {"const": BUILTIN}}}
    assert schema["$defs"]["githubCliBuiltinTools"]["additionalProperties"] is False


def test_it_refuses_a_tool_name_with_its_json_pointer():
    document = definition(
        {"kind": "mcp", "serverName": "github"},
        {"kind": "web_request"},
        {"kind": BUILTIN, "available-tools": {"tools": ["shell; rm -rf /"]}},
    )
    assert refusal(document) == f"/tools/2/available-tools/tools/0: 'shell; rm -rf /' does not match {NAME_PATTERN}"


def test_it_refuses_a_bare_name_with_an_unknown_source():
    assert refusal(definition({"kind": BUILTIN, "excluded-tools": {"tools": ["shell", "plugin:x"]}})) == (
        f"/tools/0/excluded-tools/tools/1: 'plugin:x' does not match {NAME_PATTERN}"
    )


def test_it_refuses_isolated_other_than_true():
    assert refusal(definition({"kind": BUILTIN, "available-tools": {"isolated": False}})) == (
        "/tools/0/available-tools/isolated: True was expected"
    )


def test_it_refuses_a_selector_with_both_forms():
    assert refusal(definition({"kind": BUILTIN, "available-tools": {"tools": ["shell"], "isolated": True}})) == (
        "/tools/0/available-tools: {'tools': ['shell'], 'isolated': True} is not valid under any of the given schemas"
    )


def test_it_refuses_a_selector_with_another_key():
    assert refusal(definition({"kind": BUILTIN, "excluded-tools": {"tools": ["shell"], "except": ["x"]}})) == (
        "/tools/0/excluded-tools: Additional properties are not allowed ('except' was unexpected)"
    )


def test_a_malformed_typed_entry_does_not_fall_through_to_the_generic_tool():
    assert refusal(definition({"kind": BUILTIN, "available_tools": {"tools": ["shell"]}})) == (
        "/tools/0: Additional properties are not allowed ('available_tools' was unexpected)"
    )


def test_it_refuses_an_unknown_client_mode():
    assert refusal(definition({"kind": BUILTIN, "client-mode": "sandbox"})) == (
        "/tools/0/client-mode: 'sandbox' is not one of ['empty', 'copilot-cli']"
    )


def test_client_mode_empty_requires_available_tools():
    assert refusal(definition({"kind": BUILTIN, "client-mode": "empty"})) == (
        "/tools/0: 'available-tools' is a required property"
    )


def test_client_mode_empty_requires_a_non_empty_allowlist():
    assert refusal(definition({"kind": BUILTIN, "client-mode": "empty", "available-tools": {"tools": []}})) == (
        "/tools/0/available-tools/tools: [] should be non-empty"
    )


def test_it_refuses_a_second_builtin_tools_entry():
    assert refusal(definition({"kind": BUILTIN}, {"kind": "mcp", "serverName": "github"}, {"kind": BUILTIN})) == (
        "/tools/2: An agent definition may hold only one github-cli-builtin-tools entry."
    )


def test_it_refuses_a_definition_without_a_name():
    assert refusal({"provider": "github-copilot"}) == "'name' is a required property"


def test_host_side_tools_skip_the_builtin_tools_entry():
    document = definition({"kind": "mcp", "serverName": "github"}, {"kind": BUILTIN}, {"kind": "web_request"})
    assert host_side_tools(document) == [{"kind": "mcp", "serverName": "github"}, {"kind": "web_request"}]


def test_it_validates_at_save(acme):
    row = AgentDefinition(tenant=acme.tenant, name="reviewer", provider="github-copilot",
                          tools=[{"kind": BUILTIN, "isolated": True}])
    with pytest.raises(AgentDefinitionInvalid) as caught:
        row.save()
    assert str(caught.value) == "/tools/0: Additional properties are not allowed ('isolated' was unexpected)"
    assert not AgentDefinition.objects.exists()


def test_it_validates_at_load(acme):
    row = AgentDefinition.objects.create(tenant=acme.tenant, name="reviewer", provider="github-copilot")
    # A row written around the model, as a raw migration or another tool might.
    AgentDefinition.objects.filter(pk=row.pk).update(tools=[{"kind": BUILTIN, "client-mode": "empty"}])
    with pytest.raises(AgentDefinitionInvalid) as caught:
        AgentDefinition.load(acme.tenant, name="reviewer")
    assert str(caught.value) == "/tools/0: 'available-tools' is a required property"
    assert AgentDefinition.load(acme.tenant, pk=AgentDefinition.objects.create(
        tenant=acme.tenant, name="helper", provider="echo").pk).name == "helper"
