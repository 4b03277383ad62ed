"""Each tenant gets its own action counter, starting where the host-wide one stood, so a client's
lastSeenServerSeq never runs ahead of its tenant's numbers."""
import django.db.models.deletion
from django.db import migrations, models


def one_counter_per_tenant(apps, schema_editor):
    ServerSeq = apps.get_model("sessions_app", "ServerSeq")
    Tenant = apps.get_model("grants", "Tenant")
    host_wide = ServerSeq.objects.filter(tenant__isnull=True).order_by("pk").first()
    start = host_wide.value if host_wide else 0
    ServerSeq.objects.filter(tenant__isnull=True).delete()
    tenants = Tenant.objects.values_list("pk", flat=True)
    ServerSeq.objects.bulk_create([ServerSeq(tenant_id=pk, value=start) for pk in tenants])


class Migration(migrations.Migration):

    dependencies = [
        ("grants", "0001_initial"),
        ("sessions_app", "0008_turn_model_chat_config"),
    ]

    operations = [
        migrations.AddField(
            model_name="serverseq",
            name="tenant",
            field=models.OneToOneField(null=True, on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                       to="grants.tenant"),
        ),
        migrations.RunPython(one_counter_per_tenant, migrations.RunPython.noop),
    ]
