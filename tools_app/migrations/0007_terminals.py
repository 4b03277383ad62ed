import uuid

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0007_pending_position'),
        ('tools_app', '0006_host_config_key_table'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Terminal',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('title', models.CharField(blank=True, max_length=200)),
                ('cwd', models.CharField(max_length=1000)),
                ('cols', models.PositiveSmallIntegerField(default=80)),
                ('rows', models.PositiveSmallIntegerField(default=24)),
                ('claim', models.JSONField(default=dict, help_text='The AHP TerminalClaim: who holds it.')),
                ('output', models.TextField(blank=True, help_text='The last output, at most MAX_KEPT_OUTPUT characters.')),
                ('exit_code', models.IntegerField(blank=True, null=True)),
                ('process', models.CharField(help_text='The host process holding its PTY.', max_length=64)),
                ('created', models.DateTimeField(default=django.utils.timezone.now)),
                ('creator', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='terminals', to='sessions_app.session')),
            ],
        ),
    ]
