"""A sandboxed command's secrets (its environment, the Claude CLI's MCP servers) are never on a
command line: any local user reads every process's command line in /proc."""
import os
import stat
import subprocess

from claude_agent_sdk import ClaudeAgentOptions

from agents.providers.claude import OwnServers
from agents.providers.claude_process import MCP_CONFIG, SandboxedCli
from sandbox.bubblewrap import HOME, PRIVATE, Sandbox, end_sandbox
from sandbox.proxy import StandIn

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


def test_a_sandboxed_commands_environment_reaches_it_and_no_command_line(db):
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


def test_the_claude_clis_mcp_servers_are_a_file_of_its_launch_alone(db):
    options = ClaudeAgentOptions(cli_path="/usr/bin/claude", mcp_servers={
        "remote": {"type": "http", "url": "https://mcp.example.com/", "headers": {"Authorization": f"Bearer {SECRET}"}}})
    end_sandbox("secret-mcp-config")  # a home of its own, with nothing an earlier run left
    sandbox = Sandbox("secret-mcp-config")
    cli = SandboxedCli(options, sandbox, {"ANTHROPIC_API_KEY": SECRET})
    command = cli._build_command()
    assert not any(SECRET in part for part in command)
    assert command[command.index("--mcp-config") + 1] == f"{PRIVATE}/{MCP_CONFIG}"
    written = cli.private / MCP_CONFIG
    assert SECRET in written.read_text()
    assert stat.S_IMODE(written.stat().st_mode) == 0o400
    if os.geteuid() == 0:
        assert written.stat().st_uid == sandbox.owner()[0]
    # Another launch of the session (a member's terminal) has no such folder, nor the file in its home.
    looked = sandbox.run(["/bin/sh", "-c", f"ls {PRIVATE} 2>&1; grep -rl {SECRET} {HOME} || echo none"])
    assert "No such file or directory" in looked.stdout and looked.stdout.endswith("none\n")


def test_the_clis_http_servers_are_stand_ins_whose_headers_only_the_proxy_holds():
    own = OwnServers({"docs": {"type": "http", "url": "https://mcp.example.com/mcp?x=1",
                               "headers": {"Authorization": f"Bearer {SECRET}"}}}, HOME, None, [])
    assert own.config == {"docs": {"type": "http", "url": "http://mcp-0.ahp-sandbox.invalid/mcp", "headers": {}}}
    assert own.stand_ins == [StandIn("mcp-0", "https://mcp.example.com/mcp?x=1", (("Authorization", f"Bearer {SECRET}"),))]
