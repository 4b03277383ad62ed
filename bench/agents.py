"""Turn latency the host adds around each harness, against the same scripted model in the same run.

Per harness whose CLI is installed (`make harness`), TURNS turns of the same script: the model
calls the tool `add`, reads its result and answers. Host: a turn of a session on the provider,
started with do_start_turn and answered by the runtime (the CLI in the session's sandbox, the
chat's catalog, every call recorded in the chat). Harness alone: the same CLI through the same
SDK, unsandboxed, offered only `add`, answered from memory, each turn a fresh conversation (the
host resumes the session's, so its later turns send the model a longer history). Both start the
CLI once per turn and keep one home across turns. The ratio is host time over the harness's own.

Run: `.venv/bin/python -m bench.agents`. Target: within 1.5x.
"""
import asyncio
import os
import tempfile
import time
import uuid

from .mcp_endpoint import ADD_SCHEMA, add, setup_django

TURNS = 5
PROMPT = "add 20 and 22"


def script(model):
    from tests.agents.model_server import tool_result_text, use_tool

    model.add(use_tool("add", {"a": 20, "b": 22}), tool_result_text("The sum is "))


def host_turns(provider, model):
    """Seconds per turn through the host, and the last reply."""
    from django.contrib.auth import get_user_model

    from grants.actions import do_add_member, do_create_tenant
    from grants.models import Principal
    from sessions_app.actions import do_create_session, do_start_turn
    from tools_app.runtime import run_turn
    from sessions_app.models import Turn

    tenant = do_create_tenant(f"bench-{uuid.uuid4().hex[:6]}")
    do_add_member(tenant, f"bencher-{tenant.slug}", "member")
    principal = Principal.for_person(tenant, get_user_model().objects.get(username=f"bencher-{tenant.slug}"))
    session = do_create_session(principal, uuid.uuid4(), provider)
    chat = session.chats.get(is_default=True)
    times, reply = [], None
    for _ in range(TURNS):
        script(model)
        start = time.perf_counter()
        turn = do_start_turn(principal, chat, uuid.uuid4(), PROMPT)
        asyncio.run(run_turn(turn.id, on_process_loop=False))
        times.append(time.perf_counter() - start)
        turn = Turn.objects.get(id=turn.id)
        reply = turn.response_parts[-1].get("content") if turn.state == "complete" else turn.error
    return sum(times) / len(times), reply


async def claude_alone(cli, model, home):
    from claude_agent_sdk import (AssistantMessage, ClaudeAgentOptions, ClaudeSDKClient, TextBlock, create_sdk_mcp_server,
                                  tool)

    @tool("add", "Add two numbers", ADD_SCHEMA)
    async def add_tool(arguments):
        return {"content": [{"type": "text", "text": add(None, arguments)}]}

    options = ClaudeAgentOptions(
        cli_path=cli, tools=[], setting_sources=[], allowed_tools=["mcp__host"], cwd=home,
        mcp_servers={"host": create_sdk_mcp_server("host", tools=[add_tool])},
        env={"HOME": home, "ANTHROPIC_BASE_URL": model.url, "ANTHROPIC_API_KEY": "bench",
             "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"})
    replies = []
    async with ClaudeSDKClient(options) as claude:
        await claude.query(PROMPT)
        async for message in claude.receive_response():
            if isinstance(message, AssistantMessage):
                replies.extend(b.text for b in message.content if isinstance(b, TextBlock))
    return "\n\n".join(replies)


async def copilot_alone(cli, model, home):
    from copilot import CopilotClient, RuntimeConnection
    from copilot.generated.rpc import PermissionDecisionReject
    from copilot.tools import Tool, ToolResult

    def refuse_permission(request, invocation):  # only the host's tool is offered: it needs none
        return PermissionDecisionReject(feedback="Not offered.")

    async def handler(invocation):
        return ToolResult(text_result_for_llm=add(None, invocation.arguments))

    connection = RuntimeConnection.for_stdio(path=cli)
    connection.env = {"HOME": home, "PATH": "/usr/bin:/bin", "COPILOT_HOME": f"{home}/.copilot"}
    client = CopilotClient(connection=connection)
    try:
        session = await client.create_session(
            tools=[Tool(name="add", description="Add two numbers", handler=handler, parameters=ADD_SCHEMA,
                        skip_permission=True)], available_tools=["add"], model="gpt-4.1",
            provider={"type": "openai", "base_url": f"{model.url}/v1", "wire_api": "completions", "api_key": "bench"},
            on_permission_request=refuse_permission, working_directory=home)
        answer = await session.send_and_wait(PROMPT, timeout=120)
        await session.disconnect()
    finally:
        await client.stop()
    return answer.data.content


def alone_turns(run, cli, model):
    # One home for every turn, as a session's sandbox keeps its home between turns.
    times, reply = [], None
    with tempfile.TemporaryDirectory() as home:
        for _ in range(TURNS):
            script(model)
            start = time.perf_counter()
            reply = asyncio.run(run(cli, model, home))
            times.append(time.perf_counter() - start)
    return sum(times) / len(times), reply


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
        print(f"{TURNS} turns each: the model calls add, reads its result, answers; the CLI starts once per turn")
        for provider, cli, alone in (("claude", claude_cli(), claude_alone),
                                     ("github-copilot", copilot_cli(), copilot_alone)):
            if cli is None:
                print(f"{provider:15} skipped: its CLI is not installed (make harness)")
                continue
            ours, host_reply = host_turns(provider, model)
            floor, alone_reply = alone_turns(alone, cli, model)
            ratio = ours / floor
            verdict = "within" if ratio <= 1.5 else "OVER"
            print(f"{provider:15} host {ours * 1000:7.0f} ms/turn   harness alone {floor * 1000:7.0f} ms/turn   "
                  f"ratio {ratio:.2f}x ({verdict} the 1.5x target)   replies: {host_reply!r} / {alone_reply!r}")


if __name__ == "__main__":
    main()
