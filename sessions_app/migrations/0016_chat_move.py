import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('grants', '0001_initial'),
        ('sessions_app', '0015_connection_channel'),
    ]

    operations = [
        migrations.CreateModel(
            name='ChatMove',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('request_id', models.CharField(max_length=200)),
                ('chat_id', models.UUIDField(help_text='The chat moved (it may be disposed since).')),
                ('destination_chat_id', models.UUIDField(help_text='The chat whose session it moved into.')),
                ('result', models.JSONField(help_text='The MoveChatResult answered.')),
                ('created', models.DateTimeField(default=django.utils.timezone.now)),
                ('tenant', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='grants.tenant')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('tenant', 'request_id'), name='one_chat_move_per_request')],
            },
        ),
    ]
