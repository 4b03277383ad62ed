"""The one table of HostConfig keys: the model, the checks and the root config schema all
follow it."""
import pytest
from django.core.exceptions import ImproperlyConfigured

from tools_app.actions import do_change_host_config
from tools_app.config import KEYS, ConfigInvalid, HostConfig, checked_changes, config_schema, milliseconds_field

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


def test_hostconfig_declares_one_field_per_key_in_the_tables_order():
    fields = [field.name for field in HostConfig._meta.concrete_fields if field.name not in ("id", "tenant", "modified")]
    assert fields == [key.field for key in KEYS]


def test_a_field_made_from_a_key_of_another_kind_is_refused():
    with pytest.raises(ImproperlyConfigured, match="^sessionTools holds a boolean, not a milliseconds.$"):
        milliseconds_field("sessionTools")


def test_reading_a_tenants_configuration_makes_no_row_and_sees_its_first_write(acme):
    config = HostConfig.current(acme.tenant)
    assert (config.pk, config.advanced_tools, config.client_tool_timeout_ms) == (None, False, 600000)
    assert not HostConfig.objects.filter(tenant=acme.tenant).exists()
    do_change_host_config(acme.principal("admin"), {"advancedTools": True})
    assert HostConfig.current(acme.tenant).advanced_tools is True
