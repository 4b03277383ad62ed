"""Hypothesis strategies for bad input: random JSON, wrong types, huge strings, deep nesting,
unicode edge cases and unknown fields, plus the frame checks every fuzz test shares."""
import json
import re
import uuid

from hypothesis import HealthCheck, assume, settings
from hypothesis import strategies as st

# Bounded for CI: every fuzz test together stays well under a minute per runtime.
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)

# What a peer may be answered with; -32603 (internal error) is what no input may ever cause.
DEFINED_CODES = {-32700, -32600, -32601, -32602, -32002, -32003, -32005, -32007, -32008, -32009, -32010, -32011}
MAX_FRAME = 1024 * 1024

EDGE_TEXTS = [
    "", " ", "\x00", "a\x00b", "\u202e", "\u200f", "abc\u202edef", "\u2066x\u2069", "\ufeff", "\ud800", "\udfff",
    "x\udc00y", "\U0001F600", "e\u0301", "\u0000\u0000", "\\u0000", "null", "0", "-1", "ahp-root://",
    "ahp-session:/", "ahp-session:/not-a-uuid", "ahp-chat:/../..", "agent-host-session://echo/x", "%00", "\n\r\t",
]

texts = st.one_of(st.sampled_from(EDGE_TEXTS), st.text(max_size=30))
huge_texts = st.integers(20_000, 200_000).map(lambda n: "x" * n)
numbers = st.one_of(st.integers(), st.sampled_from([2**63, -(2**63) - 1, 10**30, -0, 2**31]),
                    st.floats(allow_nan=False, allow_infinity=False))
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
# A marker the frame builder replaces with that many nested arrays: json.dumps itself would
# recurse too deep on the real thing.
deep = st.integers(50, 50_000).map(lambda n: f"__DEEP_{n}__")
json_values = st.recursive(
    st.one_of(scalars, huge_texts, deep),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(texts, children, max_size=4)),
    max_leaves=8,
)
non_json_constants = st.sampled_from(["NaN", "Infinity", "-Infinity"])
unknown_fields = st.dictionaries(st.text(min_size=1, max_size=12).map(lambda k: f"x-{k}"), json_values, max_size=2)
DEEP = re.compile(r'"__DEEP_(\d+)__"')


def fuzzed(plausible):
    """A field's value: usually something plausible, often anything at all."""
    return st.one_of(plausible, json_values)


def params_for(fields):
    """params with any subset of `fields` (name -> strategy), unknown fields, or not an object."""
    as_object = st.builds(lambda known, extra: {**extra, **known},
                          st.fixed_dictionaries({}, optional=fields), unknown_fields)
    return st.one_of(as_object, as_object, as_object, json_values)


def encode(payload):
    """The frame's text: deep markers become real nesting, so the frame is what a peer could send."""
    text = json.dumps(payload)
    text = DEEP.sub(lambda m: "[" * int(m.group(1)) + "]" * int(m.group(1)), text)
    assume(len(text.encode()) <= MAX_FRAME)
    return text


def fresh_uri(kind):
    return f"ahp-{kind}:/{uuid.uuid4()}"


class FrameChecker:
    """Sends one fuzzed frame, then a ping, and checks everything answered in between."""

    def __init__(self, client):
        self.client = client
        self.ids = iter(range(10_000, 10**9))

    def frame(self, method, params, as_request=True):
        request_id = next(self.ids) if as_request else None
        message = {"jsonrpc": "2.0", "method": method, "params": params}
        if as_request:
            message["id"] = request_id
        return self.raw(encode(message), request_id)

    def raw(self, text, request_id=None):
        self.client.ws.send(text)
        ping_id = next(self.ids)
        self.client.ws.send(json.dumps({"jsonrpc": "2.0", "id": ping_id, "method": "ping",
                                        "params": {"channel": "ahp-root://"}}))
        frames = []
        while True:
            frame = json.loads(self.client.ws.recv(timeout=20))
            if frame.get("id") == ping_id and "method" not in frame:
                assert frame == {"jsonrpc": "2.0", "id": ping_id, "result": None}, frame
                break
            frames.append(frame)
        for frame in frames:
            error = frame.get("error")
            if error is not None:
                assert error["code"] in DEFINED_CODES, (text[:300], error)
                assert isinstance(error["message"], str) and error["message"], error
        if request_id is not None:
            answers = [f for f in frames if f.get("id") == request_id and "method" not in f]
            # A frame that cannot be parsed has no id to answer to (JSON-RPC answers id null).
            answers = answers or [f for f in frames if f.get("id") is None and f.get("error", {}).get("code") == -32700]
            assert len(answers) == 1, (text[:300], frames[:5])
            return answers[0]
        return frames
