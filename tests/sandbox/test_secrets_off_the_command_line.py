"""A sandboxed command's secrets (its environment, the Claude CLI's MCP servers) are never on a
command line: any local user reads every process's command line in /proc."""
import os
import stat
import subprocess

from claude_agent_sdk import ClaudeAgentOptions

from agents.providers.claude import SandboxedCli
from sandbox.bubblewrap import HOME, Sandbox

SECRET = "sk-tenant-0123456789abcdef"


def command_lines_holding(text):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if text.encode() in cmdline.read():
                    found.append(pid)
        except OSError:
            pass  # it exited meanwhile
    return found


def test_a_sandboxed_commands_environment_reaches_it_and_no_command_line():
    sandbox = Sandbox("secret-environment")
    process = subprocess.Popen(sandbox.argv(["/bin/sh", "-c", 'echo "key=$MODEL_KEY"; sleep 5'],
                                            env={"MODEL_KEY": SECRET}),
                               stdout=subprocess.PIPE, text=True, env={})
    try:
        assert process.stdout.readline() == f"key={SECRET}\n"
        assert command_lines_holding(SECRET) == []
        assert command_lines_holding("sleep 5")  # the scan does see the sandboxed command's own line
        assert list((sandbox.folder / "launch").iterdir()) == []  # the environment file went as it started
    finally:
        process.kill()
        process.wait()


def test_the_claude_clis_mcp_servers_are_a_file_only_the_sandbox_user_reads():
    options = ClaudeAgentOptions(cli_path="/usr/bin/claude", mcp_servers={
        "remote": {"type": "http", "url": "https://mcp.example.com/", "headers": {"Authorization": f"Bearer {SECRET}"}}})
    sandbox = Sandbox("secret-mcp-config")
    cli = SandboxedCli(options, sandbox, {"ANTHROPIC_API_KEY": SECRET})
    command = cli._build_command()
    assert not any(SECRET in part for part in command)
    inside = command[command.index("--mcp-config") + 1]
    assert inside.startswith(f"{HOME}/.mcp-config-")
    written = sandbox.folder / "home" / inside.removeprefix(f"{HOME}/")
    assert SECRET in written.read_text()
    assert stat.S_IMODE(written.stat().st_mode) == 0o600
    if os.geteuid() == 0:
        assert written.stat().st_uid == sandbox.owner()[0]
