"""A scripted model for the harness tests: it stands in for the model only.

It answers the Anthropic Messages API (`POST /v1/messages`, streamed as server-sent events or
not) and the OpenAI Chat Completions API (`POST /v1/chat/completions`, streamed or not, Azure's
`/openai/v1` route too) from a script of steps (and, for the host's one-token checks only, the
Responses API's `POST /responses` and GitHub's `GET /user`), one per agent request, and records every request so a test can assert what
the harness actually sent its model (the tool list above all; `headers` holds every request's
headers, so a test can tell whose key reached it).

A step is a `Text`, a `ToolUse`, or a function of the request returning one; `use_tool` finds
a tool by the end of its offered name (`mcp__host__add` is found by "add"), `tool_result_text`
reads back what the harness put in the conversation from the last tool call. Requests that offer
no tools are taken for the harness's own side questions (a title, a topic) and get a short text
without using up a step, unless `side` says otherwise (a test whose agent is offered nothing).
"""
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: dict = field(default_factory=dict)


@dataclass
class ModelRequest:
    api: str  # "anthropic" | "openai"
    body: dict

    @property
    def tool_names(self):
        """The tools the model sees: a `defer_loading` one (Claude Code's placeholder keeping
        deferred loading on) stays hidden from it until searched for."""
        names = []
        for tool in self.body.get("tools") or ():
            if tool.get("defer_loading"):
                continue
            names.append(tool["function"]["name"] if self.api == "openai" else tool.get("name"))
        return names

    @property
    def tools(self):
        return self.body.get("tools") or []

    def last_user_text(self):
        for message in reversed(self.body.get("messages") or ()):
            if message.get("role") != "user":
                continue
            content = message.get("content")
            if isinstance(content, str):
                return content
            texts = [c.get("text", "") for c in content if c.get("type") == "text"]
            if texts:
                return texts[-1]
        return ""

    def tool_results(self):
        """The texts of every tool result in the conversation, oldest first."""
        results = []
        for message in self.body.get("messages") or ():
            if self.api == "openai" and message.get("role") == "tool":
                content = message.get("content")
                results.append(content if isinstance(content, str) else "".join(c.get("text", "") for c in content))
            elif self.api == "anthropic" and isinstance(message.get("content"), list):
                for block in message["content"]:
                    if block.get("type") == "tool_result":
                        content = block.get("content")
                        if isinstance(content, list):
                            content = "".join(c.get("text", "") for c in content if c.get("type") == "text")
                        results.append(content or "")
        return results


def use_tool(suffix, arguments):
    """A step calling the offered tool whose name ends with `suffix` (the harness prefixes it)."""
    def step(request):
        for name in request.tool_names:
            if name == suffix or name.endswith(f"__{suffix}"):
                return ToolUse(name, arguments)
        return Text(f"no tool {suffix} among {request.tool_names}")
    return step


def tool_result_text(prefix="The tool said: "):
    def step(request):
        results = request.tool_results()
        return Text(prefix + (results[-1] if results else "nothing"))
    return step


class Hold:
    """A step that keeps its request waiting until the test releases it (to kill a harness mid-turn)."""

    def __init__(self, then):
        self.then, self.arrived, self.released = then, threading.Event(), threading.Event()

    def __call__(self, request):
        self.arrived.set()
        self.released.wait(60)
        return self.then


class ModelServer:
    def __init__(self, *steps, side_text="Side answer", side=lambda request: not request.tools, refuse=None):
        self.steps = list(steps)
        self.refuse = refuse  # an HTTP status every model request is answered with (401: a wrong key)
        self.side_text, self.side = side_text, side
        self.requests = []
        self.headers = []  # every request's headers, side questions and listings included
        self.seconds = 0.0  # the model's own time: answering every POST, side questions included
        self.lock = threading.Lock()
        self.ids = itertools.count(1)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self):
        return self.server.server_address[1]

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def agent_requests(self):
        """The requests that offered tools: the agent loop's, in order."""
        return [r for r in self.requests if r.tools]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()

    def add(self, *steps):
        with self.lock:
            self.steps.extend(steps)

    def reply_to(self, request):
        with self.lock:
            self.requests.append(request)
            # The host's one-token check of the endpoint (agents.model_check) is no agent request.
            if self.side(request) or request.body.get("max_tokens") == 1:
                return Text(self.side_text)
            step = self.steps.pop(0) if self.steps else Text("The script has no more steps.")
        return step(request) if callable(step) else step

    def handler(self):
        """The request handler class answering for this server."""
        return type("Handler", (ModelHandler,), {"model": self})


class ModelHandler(BaseHTTPRequestHandler):
    """Answers the model APIs from `model`'s script (a subclass per server sets `model`)."""

    model: ModelServer
    protocol_version = "HTTP/1.1"
    # Its headers and body are two writes: on a kept-alive connection Nagle's algorithm held the
    # body until the client's delayed ACK (40 ms), twice a Claude turn, as no real endpoint does.
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def parse_request(self):
        parsed = super().parse_request()
        if parsed:
            self.model.headers.append(dict(self.headers))
        return parsed

    def do_GET(self):
        if self.path.rstrip("/").endswith("/user"):  # GitHub's API, asked who a githubToken is
            self.model.requests.append(ModelRequest("github", {}))
            if self.model.refuse:
                return self.send_json({"message": "Bad credentials"}, status=self.model.refuse)
            return self.send_json({"login": "scripted"})
        if self.path.rstrip("/").endswith("/models"):
            return self.send_json({"object": "list", "data": [
                {"id": "scripted", "object": "model", "created": 0, "owned_by": "tests"}]})
        self.send_json({"error": {"message": f"no {self.path}"}}, status=404)

    def do_POST(self):
        started = time.perf_counter()
        try:
            self.answer_post()
        finally:
            with self.model.lock:
                self.model.seconds += time.perf_counter() - started

    def answer_post(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.split("?")[0]
        if self.model.refuse:
            self.model.requests.append(ModelRequest("refused", body))
            return self.send_json({"type": "error", "error": {"type": "authentication_error",
                                                              "message": "invalid x-api-key"}},
                                  status=self.model.refuse)
        if path.endswith("/messages/count_tokens"):
            return self.send_json({"input_tokens": 10})
        if path.endswith("/messages"):
            reply = self.model.reply_to(ModelRequest("anthropic", body))
            return self.anthropic(body, reply, next(self.model.ids))
        if path.endswith("/chat/completions"):
            reply = self.model.reply_to(ModelRequest("openai", body))
            return self.openai(body, reply, next(self.model.ids))
        if path.endswith("/responses"):  # OpenAI's Responses API: the host's one-token check only
            self.model.requests.append(ModelRequest("responses", body))
            return self.send_json({"id": f"resp_{next(self.model.ids)}", "object": "response", "status": "completed",
                                   "output": [{"type": "message", "role": "assistant", "content": [
                                       {"type": "output_text", "text": self.model.side_text}]}]})
        self.send_json({"error": {"message": f"no {self.path}"}}, status=404)

    def send_json(self, payload, status=200):
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_events(self, events):
        data = "".join(events).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def anthropic(self, body, reply, number):
        usage = {"input_tokens": 10, "output_tokens": 5}
        if isinstance(reply, ToolUse):
            block = {"type": "tool_use", "id": f"toolu_{number}", "name": reply.name, "input": reply.input}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": reply.text}
            stop = "end_turn"
        message = {"id": f"msg_{number}", "type": "message", "role": "assistant",
                   "model": body.get("model", "scripted"), "stop_reason": None, "stop_sequence": None}
        if not body.get("stream"):
            return self.send_json({**message, "content": [block], "stop_reason": stop, "usage": usage})

        def event(name, payload):
            return f"event: {name}\ndata: {json.dumps({'type': name, **payload})}\n\n"

        if block["type"] == "tool_use":
            start, delta = {**block, "input": {}}, {"type": "input_json_delta",
                                                     "partial_json": json.dumps(block["input"])}
            deltas = [delta]
        else:
            # The text in two pieces, as a model streams it.
            start, half = {"type": "text", "text": ""}, len(block["text"]) // 2
            deltas = [{"type": "text_delta", "text": piece}
                      for piece in (block["text"][:half], block["text"][half:]) if piece]
        self.send_events([
            event("message_start", {"message": {**message, "content": [], "usage": usage}}),
            event("content_block_start", {"index": 0, "content_block": start}),
            *(event("content_block_delta", {"index": 0, "delta": delta}) for delta in deltas),
            event("content_block_stop", {"index": 0}),
            event("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None},
                                    "usage": {"output_tokens": 5}}),
            event("message_stop", {}),
        ])

    def openai(self, body, reply, number):
        if isinstance(reply, ToolUse):
            delta = {"role": "assistant", "content": None, "tool_calls": [{
                "index": 0, "id": f"call_{number}", "type": "function",
                "function": {"name": reply.name, "arguments": json.dumps(reply.input)}}]}
            finish = "tool_calls"
        else:
            delta = {"role": "assistant", "content": reply.text}
            finish = "stop"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        common = {"id": f"chatcmpl-{number}", "created": 0, "model": body.get("model", "scripted")}
        if not body.get("stream"):
            message = {k: v for k, v in delta.items() if k != "tool_calls"}
            if "tool_calls" in delta:
                message["tool_calls"] = [{k: v for k, v in c.items() if k != "index"}
                                         for c in delta["tool_calls"]]
            return self.send_json({**common, "object": "chat.completion", "usage": usage, "choices": [
                {"index": 0, "message": message, "finish_reason": finish}]})
        chunk = {**common, "object": "chat.completion.chunk"}
        if delta.get("content"):
            # The text in two pieces, as a model streams it.
            half = len(delta["content"]) // 2
            deltas = [{**delta, "content": delta["content"][:half]}, {"content": delta["content"][half:]}]
        else:
            deltas = [delta]
        self.send_events([
            *(f"data: {json.dumps({**chunk, 'choices': [{'index': 0, 'delta': d, 'finish_reason': None}]})}\n\n"
              for d in deltas),
            f"data: {json.dumps({**chunk, 'choices': [{'index': 0, 'delta': {}, 'finish_reason': finish}]})}\n\n",
            f"data: {json.dumps({**chunk, 'choices': [], 'usage': usage})}\n\n",
            "data: [DONE]\n\n",
        ])


@pytest.fixture
def model(monkeypatch, settings):
    """The scripted model Claude Code is pointed at (the agents' and the console's conftest offer it)."""
    with ModelServer() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        settings.AHP_OUTBOUND_ALLOW = "127.0.0.1"  # the scripted model is on loopback: allow-listed here only
        yield server
