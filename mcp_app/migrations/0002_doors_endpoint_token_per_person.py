import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    """One endpoint token per ApiToken (and one for the host's agent) replaces the one shared
    bearer per session: the shared tokens stop working, and holders ask again for their own."""

    dependencies = [
        ('grants', '0001_initial'),
        ('mcp_app', '0001_initial'),
        ('sessions_app', '0001_initial'),
    ]

    operations = [
        migrations.DeleteModel(name='ToolsEndpoint'),
        migrations.CreateModel(
            name='ToolsEndpoint',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('nonce', models.CharField(editable=False, max_length=64)),
                ('token_sha256', models.CharField(editable=False, max_length=64, unique=True)),
                ('created', models.DateTimeField(default=django.utils.timezone.now)),
                ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='tools_endpoints', to='sessions_app.session')),
                ('api_token', models.ForeignKey(blank=True, help_text='The token that asked for it, whose person the calls act as; empty for the agent the host starts, whose calls act as the person whose turn it answers.', null=True, on_delete=django.db.models.deletion.CASCADE, related_name='tools_endpoints', to='grants.apitoken')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('session', 'api_token'), name='tools_endpoint_per_token'), models.UniqueConstraint(condition=models.Q(('api_token__isnull', True)), fields=('session',), name='tools_endpoint_one_agent')],
            },
        ),
    ]
