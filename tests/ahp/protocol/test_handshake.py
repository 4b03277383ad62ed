"""The /ahp endpoint over a real socket (the in-process server): token on the upgrade, initialize
first, ping."""
import json

import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect


def url(port, token=None):
    return f"ws://127.0.0.1:{port}/ahp" + (f"?tkn={token}" if token else "")


def call(ws, method, params, request_id=1):
    ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
    return json.loads(ws.recv(timeout=10))


INIT = {"channel": "ahp-root://", "protocolVersions": ["1.0.0"], "clientId": "test-client"}


def test_it_refuses_an_upgrade_without_a_token(host):
    with pytest.raises(InvalidStatus) as refused:
        connect(url(host.port))
    assert refused.value.response.status_code == 403


def test_it_refuses_an_upgrade_with_a_wrong_token(acme, host):
    with pytest.raises(InvalidStatus):
        connect(url(host.port, acme.tokens["member"] + "x"))


def test_it_answers_initialize_and_ping_with_a_query_token(acme, host):
    with connect(url(host.port, acme.tokens["member"])) as ws:
        reply = call(ws, "initialize", INIT)
        assert reply["result"]["protocolVersion"] == "1.0.0"
        assert reply["result"]["serverInfo"]["name"] == "ahp-host"
        assert call(ws, "ping", {"channel": "ahp-root://"}, 2) == {"jsonrpc": "2.0", "id": 2, "result": None}


def test_it_accepts_a_bearer_header(acme, host):
    headers = {"Authorization": f"Bearer {acme.tokens['root']}"}
    with connect(url(host.port), additional_headers=headers) as ws:
        assert call(ws, "initialize", INIT)["result"]["protocolVersion"] == "1.0.0"


def test_anything_but_ping_before_initialize_is_refused_and_the_connection_kept(acme, host):
    with connect(url(host.port, acme.tokens["member"])) as ws:
        reply = call(ws, "listSessions", {"channel": "ahp-root://"})
        assert reply["error"] == {"code": -32600, "message": "listSessions before initialize: send initialize first."}
        assert call(ws, "ping", {"channel": "ahp-root://"}, 2)["result"] is None
        assert "result" in call(ws, "initialize", INIT, 3)


def test_no_acceptable_version_answers_32005_with_the_supported_ones_and_closes(acme, host):
    with connect(url(host.port, acme.tokens["member"])) as ws:
        reply = call(ws, "initialize", {**INIT, "protocolVersions": ["0.1", "2.0"]})
        assert reply == {"jsonrpc": "2.0", "id": 1, "error": {
            "code": -32005, "message": "No protocol version both sides speak.",
            "data": {"supportedVersions": ["1.1.0", "1.0.0"]}}}
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        assert (closed.value.rcvd.code, closed.value.rcvd.reason) == (1000, "No protocol version both sides speak.")


@pytest.mark.parametrize("request_id", [{"a": 1}, [1], True])
def test_a_request_whose_id_is_not_a_string_or_number_answers_32600_with_id_null(acme, host, request_id):
    with connect(url(host.port, acme.tokens["member"])) as ws:
        for method, params in (("initialize", INIT), ("ping", {"channel": "ahp-root://"})):
            ws.send(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}))
            assert json.loads(ws.recv(timeout=10)) == {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": "Invalid request: id must be a string, a number or null."}}
        assert call(ws, "initialize", INIT, "init")["result"]["protocolVersion"] == "1.0.0"  # never initialized
        assert call(ws, "ping", {"channel": "ahp-root://"}, 2.5) == {"jsonrpc": "2.0", "id": 2.5, "result": None}


@pytest.mark.parametrize("offered, chosen", [(["1.1.0", "1.0.0"], "1.1.0"), (["1.0.0"], "1.0.0"),
                                             (["1.0.0", "1.1.0"], "1.1.0"), (["1.1.5"], "1.1.5")])
def test_initialize_negotiates_the_newest_1x_both_sides_speak(acme, host, offered, chosen):
    with connect(url(host.port, acme.tokens["member"])) as ws:
        assert call(ws, "initialize", {**INIT, "protocolVersions": offered})["result"]["protocolVersion"] == chosen


def test_the_root_config_carries_the_schema_of_every_key_beside_its_values(acme, host):
    from tools_app.config import KEYS, config_schema

    with connect(url(host.port, acme.tokens["root"])) as ws:
        reply = call(ws, "initialize", {**INIT, "initialSubscriptions": ["ahp-root://"]})
        config = reply["result"]["snapshots"][0]["state"]["config"]
        assert config["schema"] == config_schema()
        assert set(config["schema"]["properties"]) == set(config["values"]) == {key.wire for key in KEYS}


def property_schemas(schema, where):
    """(where, ConfigPropertySchema) for every property descriptor nested in `schema`."""
    for name, prop in schema.get("properties", {}).items():
        yield f"{where}.{name}", prop
        yield from property_schemas(prop, f"{where}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            yield f"{where}.{key}", schema[key]
            yield from property_schemas(schema[key], f"{where}.{key}")


def test_every_property_of_the_root_config_schema_has_a_type_and_a_title(acme, host):
    with connect(url(host.port, acme.tokens["root"])) as ws:
        reply = call(ws, "initialize", {**INIT, "initialSubscriptions": ["ahp-root://"]})
        schema = reply["result"]["snapshots"][0]["state"]["config"]["schema"]
    assert schema["type"] == "object"
    untitled = [where for where, prop in property_schemas(schema, "config")
                if not isinstance(prop.get("title"), str) or not prop["title"]
                or prop.get("type") not in ("string", "number", "boolean", "array", "object")]
    assert untitled == []
    assert schema["properties"]["plugins"]["additionalProperties"]["properties"]["hostTools"] == {
        "type": "boolean", "title": "Host tools",
        "description": "Whether the plugin's sessions take the host's own tools."}


def test_a_non_json_frame_answers_32700_and_the_connection_survives(acme, host):
    with connect(url(host.port, acme.tokens["member"])) as ws:
        ws.send("{not json")
        assert json.loads(ws.recv(timeout=10))["error"]["code"] == -32700
        assert "result" in call(ws, "initialize", INIT)
