"""Every registered tool's input fuzzed through the path a model's call takes (the chat's catalog
snapshot and ChatToolbox), and every sessionless tool through its REST door: each case ends in
a result or a refusal sentence, never an exception and never a tool that crashed."""
import asyncio
import json
import logging
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from sessions_app.actions import do_create_session, do_start_turn
from tools_app.catalog.host_tools import REGISTRY
from tools_app.catalog.loader import catalog_for_chat
from tools_app.families.comments import tools as comments
from tools_app.models import HostConfig
from tools_app.runtime.toolbox import ChatToolbox

from .fuzz_strategies import FUZZ, huge_texts, json_values, texts, unknown_fields

TOOL_NAMES = sorted({t.effective_name for t in REGISTRY.tools})


def value_for(schema, uris):
    """Something plausible for a property of `schema`, or anything at all."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    plausible = {
        "string": st.one_of(texts, huge_texts, uris, st.sampled_from(schema.get("enum") or [""])),
        "boolean": st.booleans(),
        "number": st.one_of(st.integers(-10, 10**6), st.floats(allow_nan=False, allow_infinity=False)),
        "integer": st.integers(-10, 10**12),
        "array": st.lists(st.one_of(texts, uris), max_size=3),
        "object": st.dictionaries(texts, json_values, max_size=3),
    }.get(kind, json_values)
    return st.one_of(plausible, plausible, json_values)


def arguments_for(tool, uris):
    schema = tool.input_schema or {}
    properties = schema.get("properties") or {}
    as_object = st.builds(lambda known, extra: {**extra, **known},
                          st.fixed_dictionaries({}, optional={k: value_for(v, uris) for k, v in properties.items()}),
                          unknown_fields)
    return st.one_of(as_object, as_object, as_object, json_values)


def crashes(caplog):
    """Log records of an executor that raised instead of refusing."""
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.fixture
def turn(acme, globex, transactional_db):
    config = HostConfig.for_tenant(acme.tenant)
    config.advanced_tools = True
    config.save()
    session = do_create_session(acme.principal("member"), uuid.uuid4())
    foreign = do_create_session(globex.principal("member"), uuid.uuid4())
    chat = session.chats.get(is_default=True)
    started = do_start_turn(acme.principal("member"), chat, uuid.uuid4(), "fuzzing")
    uris = st.sampled_from([
        session.uri, chat.uri, foreign.uri, foreign.chats.get().uri, f"agent-host-session://echo/{session.id}",
        f"agent-host-session://echo/{foreign.id}", f"ahp-tool-output:/{uuid.uuid4()}", "file:///tmp", "/tmp",
    ])
    return started, uris


def test_each_tools_fuzzed_input_ends_in_a_result_or_a_refusal(turn, caplog, monkeypatch):
    started, uris = turn
    # viewUnreviewedComments waits for the person's answer; nobody answers here.
    monkeypatch.setattr(comments, "QUESTION_SECONDS", 0.05)
    toolbox = ChatToolbox(started)
    snapshot = catalog_for_chat(started.chat)
    for name in TOOL_NAMES:  # offered or not: a tool the snapshot does not hold is refused too
        tool = next(t for t in REGISTRY.tools if t.effective_name == name)
        with caplog.at_level(logging.ERROR):
            fuzz_tool(toolbox, snapshot, name, arguments_for(tool, uris), caplog)


def fuzz_tool(toolbox, snapshot, name, arguments_drawn, caplog):
    """Calls tool `name` with every example drawn: each ends in a result or a refusal, never a crash."""

    @settings(FUZZ, max_examples=30)
    @given(arguments=arguments_drawn)
    def run(arguments):
        caplog.clear()
        result = asyncio.run(toolbox.execute(snapshot, name, arguments))
        assert isinstance(result.get("success"), bool), (name, result)
        if not result["success"]:
            assert isinstance(result["error"]["message"], str) and result["error"]["message"], (name, result)
        assert crashes(caplog) == [], (name, repr(arguments)[:500])

    run()


SESSIONLESS = sorted(t.effective_name for t in REGISTRY.tools if t.sessionless)


def test_each_sessionless_tools_fuzzed_body_gets_a_4xx_or_a_result_never_a_5xx(turn, acme, caplog):
    _, uris = turn
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {acme.tokens['member']}")
    for name in SESSIONLESS:
        fuzz_door(client, next(t for t in REGISTRY.tools if t.effective_name == name), uris, caplog)


def fuzz_door(client, tool, uris, caplog):
    name = tool.effective_name

    @FUZZ
    @given(arguments=arguments_for(tool, uris))
    def run(arguments):
        caplog.clear()
        # Escaped JSON, as a peer may send it: lone surrogates reach the server as \\udXXX escapes.
        response = client.post(f"/api/v1/tools/{name}", json.dumps(arguments), content_type="application/json")
        assert response.status_code in (200, 400, 403, 404, 409, 413), (response.status_code, response.content[:300])
        body = response.json()
        # The door's own refusals say {"error"}; a body the parser refuses, DRF's {"detail"}.
        assert ("result" in body) if response.status_code == 200 else isinstance(
            body.get("error", body.get("detail")), str), body
        assert crashes(caplog) == []

    with caplog.at_level(logging.ERROR):
        run()
