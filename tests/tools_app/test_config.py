"""The one table of HostConfig keys: the model, the checks and the root config schema all
follow it."""
import pytest

from tools_app.config import KEYS, ConfigInvalid, HostConfig, checked_changes, config_schema

PROPERTY_TYPES = {"string", "number", "boolean", "array", "object"}  # ConfigPropertySchema.type in AHP


def test_every_key_is_a_model_field_with_the_tables_default():
    for key in KEYS:
        field = HostConfig._meta.get_field(key.field)
        assert field.get_default() == key.default
        assert field.help_text == key.help


def test_the_config_schema_describes_every_key():
    schema = config_schema()
    assert schema["type"] == "object"
    assert list(schema["properties"]) == [key.wire for key in KEYS]
    for key in KEYS:
        prop = schema["properties"][key.wire]
        assert prop["type"] in PROPERTY_TYPES
        assert prop["title"] == key.title and prop["description"].startswith(key.help)
        assert prop.get("default") == key.default


def test_the_config_schema_names_choices_and_their_labels():
    scope = config_schema()["properties"]["agentOrchestrationLimitsScope"]
    assert scope["enum"] == ["tree", "session"]
    assert scope["enumLabels"] == ["per session tree", "per session"]
    timeout = config_schema()["properties"]["clientToolTimeoutMs"]
    assert (timeout["type"], timeout["default"]) == ("number", 600000)
    assert timeout["description"].endswith("Default 600000.")
    assert "default" not in config_schema()["properties"]["mcpServers"]


@pytest.mark.parametrize(("changes", "sentence"), [
    ({"nope": 1}, "Unknown configuration key nope."),
    ({"advancedTools": "yes"}, "advancedTools must be true or false."),
    ({"clientToolTimeoutMs": -1}, "clientToolTimeoutMs must be a whole number of milliseconds, 0 or more."),
    ({"sessionToolsProviders": [""]}, "sessionToolsProviders must be a list of provider ids."),
    ({"agentOrchestrationLimits": "maybe"}, "agentOrchestrationLimits must be one of 'on', 'off'."),
    ({"mcpServers": {"x": {"command": "sh"}}}, "mcpServers.x: a tenant cannot name a command"),
    ({"plugins": ["claude"]}, "plugins must be an object mapping plugin names to their settings."),
    ({"plugins": {"claude": True}}, 'plugins.claude must be an object such as {"hostTools": false}.'),
    ({"plugins": {"claude": {"hostTools": "no"}}}, "plugins.claude.hostTools must be true or false."),
    ({"plugins": {"claude": {"tools": []}}}, "plugins.claude.tools is not a plugin setting; the one there is: hostTools."),
    ([], "config must be an object."),
])
def test_a_bad_change_is_refused_naming_its_key(changes, sentence):
    with pytest.raises(ConfigInvalid) as refused:
        checked_changes(changes)
    assert str(refused.value).startswith(sentence)


def test_replace_returns_omitted_keys_to_their_defaults():
    fields = checked_changes({"chatMoves.enabled": False}, replace=True)
    assert fields == {**{key.field: key.default for key in KEYS}, "chat_moves_enabled": False}
