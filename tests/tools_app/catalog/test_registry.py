import logging

from tools_app.catalog.registry import PluginTools, Tool, ToolRegistry


def names(registry):
    return [t.effective_name for t in registry.tools]


def adding(*tools):
    def transform(editor):
        for tool in tools:
            editor.add(tool)
    return transform


def test_it_builds_tools_from_transforms_in_registration_order():
    registry = ToolRegistry()
    registry.register(adding(Tool("a"), Tool("b")))
    registry.register(adding(Tool("c")))
    assert names(registry) == ["a", "b", "c"]


def test_the_latest_registration_of_a_name_wins_and_dispose_reveals_the_earlier():
    registry = ToolRegistry()
    registry.register(adding(Tool("read", description="host")))
    override = registry.register(adding(Tool("read", description="plugin")))
    assert registry.get("read").description == "plugin"
    override.dispose()
    assert registry.get("read").description == "host"


def test_dispose_is_idempotent_and_removes_only_that_transform():
    registry = ToolRegistry()
    first = registry.register(adding(Tool("a")))
    registry.register(adding(Tool("b")))
    first.dispose()
    first.dispose()
    assert names(registry) == ["b"]


def test_a_namespace_flattens_the_model_name_with_dots_as_underscores():
    registry = ToolRegistry()

    def transform(editor):
        editor.namespace("acme.files", "Acme's file tools")
        editor.add(Tool("read", namespace="acme.files"))
        editor.add(Tool("list", namespace="unregistered"))

    registry.register(transform)
    assert names(registry) == ["acme_files_read", "unregistered_list"]
    assert registry.namespaces == {"acme.files": "Acme's file tools"}


def test_an_invalid_registration_is_logged_and_skipped_without_touching_others(caplog):
    registry = ToolRegistry()
    with caplog.at_level(logging.WARNING):
        registry.register(adding(Tool("good"), Tool("bad name"), Tool("x" * 65), Tool("ok2")))
        registry.register(adding(Tool("schemaless", input_schema={"type": "string"})))
    assert names(registry) == ["good", "ok2"]
    assert "Tool name 'bad name' must match" in caplog.text
    assert "schemaless: the input schema must be an object schema" in caplog.text


def test_a_name_valid_alone_but_too_long_after_flattening_is_skipped():
    registry = ToolRegistry()
    registry.register(adding(Tool("t" * 60, namespace="ns.long")))
    assert names(registry) == []


def test_update_targets_effective_names_keeps_name_and_namespace():
    registry = ToolRegistry()
    registry.register(adding(Tool("read", namespace="fs", description="old")))

    def transform(editor):
        editor.update("fs_read", description="new", name="renamed", namespace="other")
        editor.update("missing", description="nothing happens")
        editor.remove("missing")

    registry.register(transform)
    assert names(registry) == ["fs_read"]
    assert registry.get("fs_read").description == "new"


def test_an_invalid_update_leaves_the_previous_definition_intact():
    registry = ToolRegistry()
    registry.register(adding(Tool("read", description="kept")))
    registry.register(lambda editor: editor.update("read", input_schema={"type": "array"}, description="lost"))
    assert registry.get("read").description == "kept"


def test_remove_takes_an_effective_name():
    registry = ToolRegistry()
    registry.register(adding(Tool("a"), Tool("b")))
    registry.register(lambda editor: editor.remove("a"))
    assert names(registry) == ["b"]


def test_reload_reads_sources_again_without_changing_precedence():
    registry = ToolRegistry()
    source = {"description": "v1"}
    registry.register(lambda editor: editor.add(Tool("read", description=source["description"])))
    registry.register(adding(Tool("read", description="override")))
    source["description"] = "v2"
    registry.reload()
    assert registry.get("read").description == "override"


def test_plugins_append_with_register_tool_and_replace_with_set_tools():
    registry = ToolRegistry()
    registry.register(adding(Tool("host_tool")))
    plugins = PluginTools(registry)
    plugins.register_tool(Tool("p1"))
    plugins.register_tool(Tool("p2"))
    assert names(registry) == ["host_tool", "p1", "p2"]
    plugins.set_tools([Tool("p3")])
    assert names(registry) == ["host_tool", "p3"]
    assert registry.get("p3").source == "plugin"


def test_listeners_hear_every_change_and_only_changes():
    registry = ToolRegistry()
    heard = []
    registry.on_change(lambda r: heard.append(names(r)))
    handle = registry.register(adding(Tool("a")))
    registry.reload()
    handle.dispose()
    assert heard == [["a"], []]
