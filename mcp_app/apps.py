from django.apps import AppConfig


class McpAppConfig(AppConfig):
    name = "mcp_app"
    verbose_name = "MCP"

    def ready(self):
        from sessions_app.providers import PROVIDERS

        from . import signals  # noqa: F401  (connects the session hooks)
        from .acp_provider import AcpProvider

        provider = AcpProvider()
        PROVIDERS.setdefault(provider.id, provider)
