"""Seal the env and headers values stored before they were encrypted at rest."""
from django.db import migrations


def seal_stored(apps, schema_editor):
    from sandbox.sealing import sealed_entries

    HostConfig = apps.get_model("tools_app", "HostConfig")
    for config in HostConfig.objects.exclude(mcp_servers=None):
        sealed = sealed_entries(config.mcp_servers)
        if sealed != config.mcp_servers:
            HostConfig.objects.filter(pk=config.pk).update(mcp_servers=sealed)


class Migration(migrations.Migration):
    dependencies = [("tools_app", "0003_fulltooloutput")]
    operations = [migrations.RunPython(seal_stored, migrations.RunPython.noop)]
