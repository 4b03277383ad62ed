import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def name_each_calls_tenant(apps, schema_editor):
    ToolCall = apps.get_model("sessions_app", "ToolCall")
    Turn = apps.get_model("sessions_app", "Turn")
    tenant = Turn.objects.filter(pk=OuterRef("turn_id")).values("chat__session__tenant_id")[:1]
    ToolCall.objects.update(tenant_id=Subquery(tenant))


class Migration(migrations.Migration):

    dependencies = [
        ("grants", "0001_initial"),
        ("sessions_app", "0010_tenant_numbering"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="toolcall",
            name="tenant",
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE,
                                    related_name="tool_calls", to="grants.tenant"),
        ),
        migrations.RunPython(name_each_calls_tenant, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="toolcall",
            name="tenant",
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="tool_calls",
                                    to="grants.tenant"),
        ),
        migrations.AddField(
            model_name="toolcall",
            name="caller",
            field=models.ForeignKey(blank=True, help_text="Who called without a session; a turn's call names its turn's sender instead.",
                                    null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="+",
                                    to=settings.AUTH_USER_MODEL),
        ),
        migrations.AlterField(
            model_name="toolcall",
            name="turn",
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE,
                                    related_name="tool_calls", to="sessions_app.turn"),
        ),
    ]
