"""Actions are numbered per tenant: the counter belongs to its tenant, and the action log is keyed
by (tenant, seq). The log is a bounded replay buffer, so it starts empty: a client reconnecting
across this migration is answered with fresh snapshots."""
import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("grants", "0001_initial"),
        ("sessions_app", "0009_tenant_counters"),
    ]

    operations = [
        migrations.AlterField(
            model_name="serverseq",
            name="tenant",
            field=models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                       to="grants.tenant"),
        ),
        migrations.DeleteModel(name="ActionLog"),
        migrations.CreateModel(
            name="ActionLog",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("seq", models.BigIntegerField()),
                ("channel", models.CharField(max_length=200)),
                ("envelope", models.JSONField()),
                ("process", models.CharField(help_text="The process that published it.", max_length=64)),
                ("created", models.DateTimeField(default=django.utils.timezone.now)),
                ("tenant", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="+",
                                             to="grants.tenant")),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("tenant", "seq"), name="actionlog_tenant_seq")],
                "indexes": [models.Index(fields=["tenant", "channel", "seq"], name="actionlog_tenant_channel_seq")],
            },
        ),
    ]
