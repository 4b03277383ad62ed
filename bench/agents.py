"""Turn latency the host adds around each harness, against the same scripted model in the same run.

Per harness whose CLI is installed (`make harness`), TURNS turns of the same script: the model
calls the tool `add`, reads its result and answers. Host: the turns of one chat of a session on the
provider, started with do_start_turn and answered by the runtime on one serving loop (the CLI in
the session's sandbox, the chat's catalog, every call recorded in the chat): turn 1 starts the
CLI, turns 2-6 go to the warm one. Harness alone: the same CLI through the same SDK, unsandboxed,
offered only `add`, answered from memory, started cold each turn, each turn a fresh conversation
(the host's later turns send the model a longer history). Both keep one home across turns.

Reported per provider: turn time and time to the first response part (host: the first
chat/responsePart committed; alone: the first streamed text) for turn 1 and turns 2-6, the host's
overhead on a warm turn (its time less the model server's own), the warm harness's resident memory
(its sandbox's processes) and how many warm chats 8 GiB holds.

Run: `.venv/bin/python -m bench.agents`. Targets: turn 1 <= 1.2x the cold harness turn, turns
2-6 <= 0.35x, host overhead on a warm turn <= 100 ms.
"""
import asyncio
import os
import tempfile
import time
import uuid

from .mcp_endpoint import ADD_SCHEMA, add, setup_django

TURNS = 6
PROMPT = "add 20 and 22"
NODE_MEMORY = 8 * 1024 ** 3


def script(model):
    from tests.agents.model_server import tool_result_text, use_tool

    model.add(use_tool("add", {"a": 20, "b": 22}), tool_result_text("The sum is "))


class FirstParts:
    """When each turn's first reply piece reached its chat (chat/responsePart committed)."""

    def __init__(self):
        from tools_app.runtime.toolbox import ChatToolbox

        self.at, stream = {}, ChatToolbox.stream

        async def timed(toolbox, text):
            await stream(toolbox, text)
            self.at.setdefault(toolbox.turn.id, time.perf_counter())

        ChatToolbox.stream = timed


def host_turns(provider, model, first_parts, turns=TURNS, prewarm=False):
    """Per turn (seconds, seconds to the first part, the model's seconds); the warm harness's
    memory; the last reply; with `prewarm`, first the seconds the session's pre-warm took (as
    createSession starts it) before the person's first message."""
    from django.contrib.auth import get_user_model

    from agents.warm import WARM
    from grants.actions import do_add_member, do_create_tenant
    from grants.models import Principal
    from sessions_app.actions import do_create_session, do_start_turn
    from sessions_app.models import Turn
    from tools_app.prewarm import prewarm_session
    from tools_app.runtime.turns import run_turn

    tenant = do_create_tenant(f"bench-{uuid.uuid4().hex[:6]}")
    do_add_member(tenant, f"bencher-{tenant.slug}", "member")
    principal = Principal.for_person(tenant, get_user_model().objects.get(username=f"bencher-{tenant.slug}"))
    session = do_create_session(principal, uuid.uuid4(), provider)
    chat = session.chats.get(is_default=True)
    loop = asyncio.new_event_loop()  # the serving process's loop: its turns keep their harness warm
    timed, reply, warming = [], None, None
    if prewarm:
        start = time.perf_counter()
        loop.run_until_complete(prewarm_session(session.id, provider, chat.id))
        warming = time.perf_counter() - start
    for _ in range(turns):
        script(model)
        model_before, start = model.seconds, time.perf_counter()
        turn = do_start_turn(principal, chat, uuid.uuid4(), PROMPT)
        loop.run_until_complete(run_turn(turn.id))
        end = time.perf_counter()
        timed.append((end - start, first_parts.at.get(turn.id, end) - start, model.seconds - model_before))
        turn = Turn.objects.get(id=turn.id)
        reply = turn.response_parts[-1].get("content") if turn.state == "complete" else turn.error
    warm = WARM.warm.get((provider, str(chat.id)))
    loop.run_until_complete(WARM.stop_all())
    pending = asyncio.all_tasks(loop)  # the runtime's own (its wake-up reader)
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.close()
    return timed, warm.memory if warm else 0, reply, warming


async def claude_alone(cli, model, home, count):
    """`count` turns of one CLI (started for the first): per turn (seconds, seconds to the first
    streamed text), and the last reply."""
    from claude_agent_sdk import (
        AssistantMessage,
        ClaudeAgentOptions,
        ClaudeSDKClient,
        StreamEvent,
        TextBlock,
        create_sdk_mcp_server,
        tool,
    )

    @tool("add", "Add two numbers", ADD_SCHEMA)
    async def add_tool(arguments):
        return {"content": [{"type": "text", "text": add(None, arguments)}]}

    options = ClaudeAgentOptions(
        cli_path=cli, tools=[], setting_sources=[], allowed_tools=["mcp__host"], cwd=home, include_partial_messages=True,
        mcp_servers={"host": create_sdk_mcp_server("host", tools=[add_tool])},
        env={"HOME": home, "ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "bench",
             "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"})
    turns, start = [], time.perf_counter()
    async with ClaudeSDKClient(options) as claude:
        for _ in range(count):
            script(model)
            replies, first = [], None
            await claude.query(PROMPT)
            async for message in claude.receive_response():
                if isinstance(message, StreamEvent) and message.event.get("delta", {}).get("type") == "text_delta":
                    first = first or time.perf_counter()
                if isinstance(message, AssistantMessage):
                    replies.extend(b.text for b in message.content if isinstance(b, TextBlock))
            end = time.perf_counter()
            turns.append((end - start, (first or end) - start))
            start = end
    return turns, "\n\n".join(replies)


async def copilot_alone(cli, model, home, count):
    """As claude_alone, for the Copilot CLI: one CLI server and session."""
    from copilot import CopilotClient, RuntimeConnection
    from copilot.generated.rpc import PermissionDecisionReject
    from copilot.generated.session_events import AssistantMessageDeltaData
    from copilot.tools import Tool, ToolResult

    def refuse_permission(request, invocation):  # only the host's tool is offered: it needs none
        return PermissionDecisionReject(feedback="Not offered.")

    async def handler(invocation):
        return ToolResult(text_result_for_llm=add(None, invocation.arguments))

    connection = RuntimeConnection.for_stdio(path=cli)
    connection.env = {"HOME": home, "PATH": "/usr/bin:/bin", "COPILOT_HOME": f"{home}/.copilot"}
    client = CopilotClient(connection=connection)
    turns, start, first = [], time.perf_counter(), []
    try:
        session = await client.create_session(
            tools=[Tool(name="add", description="Add two numbers", handler=handler, parameters=ADD_SCHEMA,
                        skip_permission=True)], available_tools=["add"], model="gpt-4.1",
            provider={"type": "openai", "base_url": f"{model.url}/v1", "wire_api": "completions", "api_key": "bench"},
            on_permission_request=refuse_permission, working_directory=home, streaming=True)
        session.on(lambda event: first.append(time.perf_counter()) if isinstance(event.data, AssistantMessageDeltaData)
                   and event.data.delta_content else None)
        for _ in range(count):
            script(model)
            first.clear()
            answer = await session.send_and_wait(PROMPT, timeout=120)
            end = time.perf_counter()
            turns.append((end - start, (first[0] if first else end) - start))
            start = end
        await session.disconnect()
    finally:
        await client.stop()
    return turns, answer.data.content


def alone_turns(run, cli, model):
    """The harness alone: per turn (seconds, seconds to the first streamed text) started cold each
    turn, then TURNS turns of one warm CLI; the last reply."""
    # One home for every turn, as a session's sandbox keeps its home between turns.
    cold = []
    with tempfile.TemporaryDirectory() as home:
        for _ in range(TURNS):
            turns, reply = asyncio.run(run(cli, model, home, 1))
            cold.extend(turns)
    with tempfile.TemporaryDirectory() as home:
        warm, reply = asyncio.run(run(cli, model, home, TURNS))
    return cold, warm, reply


def mean(values):
    values = list(values)
    return sum(values) / len(values)


def report(provider, host, memory, alone, alone_warm, prewarmed):
    """The provider's lines: turn 1 and turns 2-6 against the cold harness, overhead, memory."""
    cold, cold_first = mean(t for t, _ in alone), mean(f for _, f in alone)
    alone_warm_turn = mean(t for t, _ in alone_warm[1:])
    (first_turn, first_part, _), warm = host[0], host[1:]
    warm_turn, warm_first = mean(t for t, _, _ in warm), mean(f for _, f, _ in warm)
    overhead = mean(t - m for t, _, m in warm)

    def verdict(value, target):
        return "within" if value <= target else "OVER"

    print(f"{provider:15} harness alone, cold each turn: {cold * 1000:6.0f} ms/turn, first text {cold_first * 1000:6.0f} ms")
    # A session's first turn is its CLI's first in the sandbox's fresh home, as the alone's first is.
    fresh = alone[0][0]
    print(f"{'':15} host turn 1:    {first_turn * 1000:6.0f} ms, first part {first_part * 1000:6.0f} ms   ratio "
          f"{first_turn / cold:.2f}x ({verdict(first_turn / cold, 1.2)} the 1.2x target); against the alone's "
          f"first turn in a fresh home ({fresh * 1000:.0f} ms): {first_turn / fresh:.2f}x")
    (prewarmed_turn, prewarmed_first, _), warming = prewarmed
    print(f"{'':15} host turn 1 after the pre-warm at session create ({warming * 1000:.0f} ms): "
          f"{prewarmed_turn * 1000:.0f} ms, first part {prewarmed_first * 1000:.0f} ms   ratio {prewarmed_turn / cold:.2f}x "
          f"({verdict(prewarmed_turn / cold, 1.2)} the 1.2x target)")
    print(f"{'':15} host turns 2-{TURNS}: {warm_turn * 1000:6.0f} ms, first part {warm_first * 1000:6.0f} ms   ratio "
          f"{warm_turn / cold:.2f}x ({verdict(warm_turn / cold, 0.35)} the 0.35x target)")
    print(f"{'':15} host overhead on a warm turn (turn less the model server's time): {overhead * 1000:.0f} ms "
          f"({verdict(overhead, 0.1)} the 100 ms target); the harness alone, warm: {alone_warm_turn * 1000:.0f} ms/turn, "
          f"so the host adds {(warm_turn - alone_warm_turn) * 1000:.0f} ms")
    if memory:
        print(f"{'':15} a warm harness holds {memory / 1024 ** 2:.0f} MiB resident: {NODE_MEMORY // memory} warm chats in 8 GiB")


def main():
    from tests.agents.model_server import ModelServer

    with tempfile.TemporaryDirectory() as var_dir, ModelServer() as model:
        os.environ["AHP_OUTBOUND_ALLOW"] = "127.0.0.1"  # the scripted model is on loopback
        os.environ["ANTHROPIC_BASE_URL"], os.environ["ANTHROPIC_API_KEY"] = model.url, "bench"
        os.environ["AHP_COPILOT_BASE_URL"], os.environ["AHP_COPILOT_API_KEY"] = f"{model.url}/v1", "bench"
        setup_django(var_dir)
        from agents.harness import claude_cli, copilot_cli
        from agents.registry import build
        from tools_app.catalog.host_tools import REGISTRY
        from tools_app.catalog.registry import Tool

        build()
        REGISTRY.register(lambda editor: editor.add(Tool("add", description="Add two numbers", executor=add,
                                                         input_schema=ADD_SCHEMA)), label="bench")
        first_parts = FirstParts()
        print(f"{TURNS} turns each: the model calls add, reads its result, answers")
        for provider, cli, alone in (("claude", claude_cli(), claude_alone),
                                     ("github-copilot", copilot_cli(), copilot_alone)):
            if cli is None:
                print(f"{provider:15} skipped: its CLI is not installed (make harness)")
                continue
            host, memory, host_reply, _ = host_turns(provider, model, first_parts)
            prewarmed, _, _, warming = host_turns(provider, model, first_parts, turns=1, prewarm=True)
            floor, alone_warm, alone_reply = alone_turns(alone, cli, model)
            report(provider, host, memory, floor, alone_warm, (prewarmed[0], warming))
            print(f"{'':15} replies: {host_reply!r} / {alone_reply!r}")


if __name__ == "__main__":
    main()
