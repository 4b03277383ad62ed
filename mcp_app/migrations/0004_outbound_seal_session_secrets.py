"""Seal the env and headers values sessions captured before they were encrypted at rest."""
from django.db import migrations


def seal_stored(apps, schema_editor):
    from sandbox.sealing import sealed_entries

    SessionMcpServers = apps.get_model("mcp_app", "SessionMcpServers")
    for row in SessionMcpServers.objects.exclude(servers=None):
        sealed = sealed_entries(row.servers)
        if sealed != row.servers:
            SessionMcpServers.objects.filter(pk=row.pk).update(servers=sealed)


class Migration(migrations.Migration):
    dependencies = [("mcp_app", "0003_stdio_servers")]
    operations = [migrations.RunPython(seal_stored, migrations.RunPython.noop)]
