"""Every socket method, and dispatchAction with every accepted action type, fuzzed: each case
ends in a defined JSON-RPC error (or an accepted or rejected action), never an internal error,
and the connection and the worker survive (a ping answers after every example)."""
import json
import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed

from ahp.protocol.client_actions import CLIENT_ACTIONS

from ..ahp.protocol.harness import AhpClient, default_chat
from .fuzz_strategies import (
    FUZZ,
    FrameChecker,
    encode,
    fresh_uri,
    fuzzed,
    json_values,
    non_json_constants,
    params_for,
    texts,
)

ROOT = "ahp-root://"


class Places:
    """A session and chat of the fuzzing tenant, one of another tenant's, and strategies over them."""

    def __init__(self, client, foreign):
        self.session = client.create_session()
        self.chat = default_chat(client, self.session)
        self.foreign_session = foreign.create_session()
        self.foreign_chat = default_chat(foreign, self.foreign_session)
        self.channels = st.sampled_from([
            ROOT, self.session, self.chat, f"{self.session}/annotations", self.foreign_session, self.foreign_chat,
            f"{self.foreign_session}/annotations", "ahp-session:/not-a-uuid", "ahp-chat:/", "ahp-root:///x",
        ]) | st.builds(fresh_uri, st.sampled_from(["session", "chat"]))
        self.channel = fuzzed(self.channels)
        self.uuid_text = fuzzed(st.uuids().map(str))


def method_params(places, client_id):
    channel = places.channel
    return {
        "initialize": {"channel": channel, "protocolVersions": fuzzed(st.lists(st.sampled_from(["1.0.0", "1.2.3", "2.0.0"]))),
                       "clientId": fuzzed(st.just(client_id)), "clientInfo": json_values,
                       "initialSubscriptions": fuzzed(st.lists(places.channels, max_size=3))},
        "ping": {"channel": channel},
        "reconnect": {"clientId": fuzzed(st.just(client_id)), "lastSeenServerSeq": fuzzed(st.integers(-5, 10**6)),
                      "subscriptions": fuzzed(st.lists(places.channels, max_size=3))},
        "subscribe": {"channel": channel},
        "unsubscribe": {"channel": channel},
        "listSessions": {"channel": channel, "limit": fuzzed(st.integers(-3, 500)), "cursor": texts},
        "createSession": {"channel": fuzzed(st.builds(fresh_uri, st.just("session"))),
                          "provider": fuzzed(st.sampled_from(["echo", "nope"])),
                          "workingDirectories": fuzzed(st.lists(texts, max_size=2)), "config": json_values,
                          "activeClient": fuzzed(st.fixed_dictionaries({"clientId": st.just(client_id),
                                                                        "tools": st.lists(json_values, max_size=2)}))},
        "disposeSession": {"channel": fuzzed(st.builds(fresh_uri, st.just("session")) | places.channels)},
        "createChat": {"channel": channel, "chat": fuzzed(st.builds(fresh_uri, st.just("chat"))),
                       "initialMessage": fuzzed(st.fixed_dictionaries({"text": texts})),
                       "source": fuzzed(st.fixed_dictionaries({"kind": st.sampled_from(["fork", "sideChat"]),
                                                               "chat": places.channels, "turnId": texts}))},
        "disposeChat": {"channel": channel},
    }


def action_fields(places, client_id):
    turn = {"turnId": places.uuid_text, "toolCallId": places.uuid_text}
    annotation = {"annotationId": places.uuid_text}
    return {
        "session/activeClientSet": {"activeClient": fuzzed(st.fixed_dictionaries(
            {"clientId": fuzzed(st.just(client_id)), "tools": fuzzed(st.lists(st.fixed_dictionaries(
                {"name": texts, "inputSchema": json_values}), max_size=2))}))},
        "session/activeClientRemoved": {"clientId": fuzzed(st.just(client_id))},
        "session/titleChanged": {"title": fuzzed(texts)},
        "session/isArchivedChanged": {"isArchived": fuzzed(st.booleans())},
        "session/isReadChanged": {"isRead": fuzzed(st.booleans())},
        "chat/turnStarted": {"turnId": places.uuid_text, "startedAt": texts, "message": fuzzed(st.fixed_dictionaries(
            {"text": texts}, optional={"origin": fuzzed(st.fixed_dictionaries({"kind": texts}))}))},
        "chat/toolCallComplete": {**turn, "result": fuzzed(st.fixed_dictionaries(
            {"success": fuzzed(st.booleans()), "pastTenseMessage": fuzzed(texts)},
            optional={"content": fuzzed(st.lists(json_values, max_size=3))}))},
        "chat/toolCallConfirmed": {**turn, "approved": fuzzed(st.booleans())},
        "root/configChanged": {"config": fuzzed(st.dictionaries(st.sampled_from(
            ["sessionTools", "clientToolTimeoutMs", "agentOrchestrationLimits", "chatMoves.enabled", "nope"]),
            json_values, max_size=2)), "replace": json_values},
        "annotations/set": {"annotation": json_values},
        "annotations/updated": {**annotation, "resolved": json_values, "range": json_values, "turnId": texts,
                                "resource": texts},
        "annotations/removed": annotation,
        "annotations/entrySet": {**annotation, "entry": json_values},
        "annotations/entryRemoved": {**annotation, "entryId": places.uuid_text},
        "session/configChanged": {"config": fuzzed(st.dictionaries(st.sampled_from(["model", "isolation", "nope"]),
                                                                   json_values, max_size=2)), "replace": json_values},
        "session/defaultChatChanged": {"defaultChat": fuzzed(places.channels)},
        "chat/turnCancelled": {"turnId": places.uuid_text},
        "chat/pendingMessageSet": {"kind": fuzzed(st.sampled_from(["steering", "queued"])), "id": places.uuid_text,
                                   "message": fuzzed(st.fixed_dictionaries({"text": texts}))},
        "chat/pendingMessageRemoved": {"kind": fuzzed(st.sampled_from(["steering", "queued"])), "id": places.uuid_text},
        "chat/queuedMessagesReordered": {"order": fuzzed(st.lists(places.uuid_text, max_size=3))},
        "chat/truncated": {"turnId": places.uuid_text},
        "chat/draftChanged": {"draft": fuzzed(st.fixed_dictionaries(
            {"text": texts}, optional={"model": fuzzed(st.fixed_dictionaries({"id": texts})),
                                       "attachments": json_values}))},
        "chat/toolCallResultConfirmed": {**turn, "approved": json_values},
        "chat/inputAnswerChanged": {"requestId": texts, "questionId": texts, "answer": json_values},
        "chat/inputCompleted": {"requestId": texts, "response": texts, "answers": json_values},
        "session/workingDirectorySet": {"directory": fuzzed(texts)},
        "session/workingDirectoryRemoved": {"directory": fuzzed(texts)},
        "session/customizationToggled": {"id": fuzzed(texts), "enabled": fuzzed(st.booleans())},
        "chat/workingDirectorySet": {"directory": fuzzed(texts)},
        "chat/workingDirectoryRemoved": {"directory": fuzzed(texts)},
        "chat/toolCallContentChanged": {**turn, "content": fuzzed(st.lists(json_values, max_size=3))},
        # No terminal is open while fuzzing (a shell needs the sandbox): these reach only absent channels.
        "terminal/input": {"data": texts},
        "terminal/resized": {"cols": json_values, "rows": json_values},
        "terminal/claimed": {"claim": json_values},
        "terminal/titleChanged": {"title": json_values},
        "terminal/cleared": {},
    }


@pytest.fixture
def fuzzing(acme, globex, host):
    with AhpClient(host.port, acme.tokens["admin"], "fuzzer") as client, \
            AhpClient(host.port, globex.tokens["root"], "other") as foreign:
        places = Places(client, foreign)
        client.subscribe(places.session)
        client.subscribe(places.chat)
        yield client, places
    # The worker survived: a new connection is served.
    with AhpClient(host.port, acme.tokens["member"], "after") as after:
        assert after.call("ping", {"channel": ROOT}) is None


SOCKET_METHODS = ["ping", "reconnect", "subscribe", "unsubscribe", "listSessions", "createSession",
                  "disposeSession", "createChat", "disposeChat"]


def test_it_answers_every_fuzzed_call_of_each_method_with_a_defined_error_or_a_result(fuzzing):
    client, places = fuzzing
    checker = FrameChecker(client)
    # One connection for every method and example (a server per method would cost more than the fuzzing).
    for method in SOCKET_METHODS:
        fuzz_method(checker, method, params_for(method_params(places, client.client_id)[method]))


def fuzz_method(checker, method, params):
    """Sends `method` with every example `params` draws, as a request and as a notification."""

    @FUZZ
    @given(params=params, as_request=st.booleans())
    def run(params, as_request):
        checker.frame(method, params, as_request)

    run()


def test_it_answers_every_fuzzed_initialize_before_and_after_initializing(acme, globex, host):
    """Only an initialize offering no version the host speaks ends the connection: answered
    -32005, then closed (1000), as the protocol's negotiation asks; the next example reconnects."""
    with AhpClient(host.port, globex.tokens["root"], "other") as foreign:
        places = Places(foreign, foreign)
        checker = FrameChecker(AhpClient(host.port, acme.tokens["member"], "fresh", initialize=False))

        @FUZZ
        @given(params=params_for(method_params(places, "fresh")["initialize"]))
        def run(params):
            try:
                answer = checker.frame("initialize", params)
            except ConnectionClosed as closed:
                assert (closed.rcvd.code, closed.rcvd.reason) == (1000, "No protocol version both sides speak.")
                checker.client.close()
                checker.client = AhpClient(host.port, acme.tokens["member"], "fresh", initialize=False)
                return
            assert answer.get("error", {}).get("code") != -32005, answer

        try:
            run()
        finally:
            checker.client.close()


def test_it_answers_every_fuzzed_action_of_each_accepted_type(fuzzing, caplog):
    client, places = fuzzing
    checker = FrameChecker(client)
    for action_type in sorted(CLIENT_ACTIONS):
        fields = action_fields(places, client.client_id)[action_type]
        extra = st.dictionaries(texts, json_values, max_size=2)

        @FUZZ
        @given(channel=places.channel, client_seq=fuzzed(st.integers(0, 10**6)),
               action=fuzzed(st.builds(lambda known, unknown, t=action_type: {**unknown, **known, "type": t},
                                       st.fixed_dictionaries({}, optional=fields), extra)))
        def run(channel, client_seq, action):
            checker.frame("dispatchAction", {"channel": channel, "clientSeq": client_seq, "action": action},
                          as_request=False)

        run()
    # A notification is never answered, so an internal error shows only in the host's log.
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


@st.composite
def raw_frames(draw):
    """Frames that are not well-formed JSON-RPC at all."""
    return draw(st.one_of(
        st.text(max_size=200),
        json_values.map(encode),
        st.builds(lambda i, m: encode({"jsonrpc": "2.0", "id": i, "method": m, "params": {}}), json_values, texts),
        st.builds(lambda v, m: encode({"jsonrpc": v, "id": 1, "method": m}), json_values, st.sampled_from(["ping", "x"])),
        st.builds(lambda c: '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"channel": %s}}' % c,
                  non_json_constants),
        st.builds(lambda r: encode({"jsonrpc": "2.0", "id": r, "result": None}), st.integers()),
    ))


def test_it_answers_every_malformed_frame_and_keeps_the_connection(fuzzing):
    client, _ = fuzzing
    checker = FrameChecker(client)

    @FUZZ
    @given(text=raw_frames())
    def run(text):
        checker.raw(text)

    run()


def test_a_nan_in_a_frame_is_a_parse_error(fuzzing):
    client, _ = fuzzing
    client.send('{"jsonrpc": "2.0", "id": 7, "method": "listSessions", "params": {"limit": NaN}}')
    reply = json.loads(client.ws.recv(timeout=10))
    assert reply["error"] == {"code": -32700, "message": "Parse error: the frame is not JSON."}
