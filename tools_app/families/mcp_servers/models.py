import os

from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from sessions_app.models import Session
from tools_app.config import StampedManager


class SessionMcpServers(models.Model):
    """The tenant's mcpServers as they were when the session started (a running session keeps
    them), and what the host last learned of each server's tools."""

    session = models.OneToOneField(Session, on_delete=models.CASCADE, related_name="mcp_servers", primary_key=True)
    servers = models.JSONField(
        null=True, blank=True, help_text="The usable entries of the tenant's mcpServers at start; empty when it had none.",
    )
    server_tools = models.JSONField(
        default=dict, blank=True,
        help_text='Per server name: {"tools": [MCP tool definitions]} or {"error": why it could not be listed}.',
    )
    client_servers = models.JSONField(
        default=dict, blank=True,
        help_text="Per client id: the http servers its plugins' .mcp.json declared, as the client answered.",
    )
    created = models.DateTimeField(default=timezone.now)
    modified = models.DateTimeField(auto_now=True)

    tenant_path = "session__tenant"
    objects = StampedManager()

    class Meta:
        verbose_name = "session MCP servers"
        verbose_name_plural = "session MCP servers"

    def __str__(self):
        return f"MCP servers of {self.session_id}"


class StdioServer(models.Model):
    """An MCP server the operator lets tenants use: its command runs over stdio, in the sandbox
    of each session that picks it by name (`{"type": "stdio", "server": "<name>"}` in a tenant's
    mcpServers). Host-wide: only a superuser defines one; a tenant never names a command."""

    name = models.SlugField(unique=True)
    description = models.CharField(max_length=200, blank=True)
    command = models.CharField(max_length=500, help_text="An absolute path, run inside the session's sandbox.")
    args = models.JSONField(default=list, blank=True, help_text="A list of strings.")
    env = models.JSONField(default=dict, blank=True, help_text="Environment the server starts with (names to strings).")
    read_only_paths = models.JSONField(
        default=list, blank=True,
        help_text="Host folders the server needs to read (its program, a virtualenv); bound read-only into the sandbox.",
    )

    def __str__(self):
        return self.name

    def clean(self) -> None:
        problems = {}
        if not os.path.isabs(self.command or ""):
            problems["command"] = "The command is an absolute path (/usr/local/bin/server)."
        if not _strings(self.args):
            problems["args"] = 'Write the arguments as a JSON list of strings: ["--flag", "value"].'
        if not (isinstance(self.env, dict) and _strings(self.env.values()) and _strings(self.env)):
            problems["env"] = 'Write the environment as a JSON object of names to strings: {"NAME": "value"}.'
        if not (_strings(self.read_only_paths) and all(os.path.isabs(p) for p in self.read_only_paths)):
            problems["read_only_paths"] = 'Write the folders as a JSON list of absolute paths: ["/opt/server"].'
        if problems:
            raise ValidationError(problems)

    def to_entry(self):
        return {"command": self.command, "args": list(self.args), "env": dict(self.env),
                "readOnlyPaths": list(self.read_only_paths)}


def _strings(values: object) -> bool:
    return isinstance(values, (list, dict, type({}.values()))) and all(isinstance(v, str) for v in values)
