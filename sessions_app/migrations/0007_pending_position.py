from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('sessions_app', '0006_drift_turn_error'),
    ]

    operations = [
        migrations.AddField(
            model_name='pendingmessage',
            name='position',
            field=models.PositiveIntegerField(default=0, help_text="Its place in the chat's queue (reorderable)."),
        ),
    ]
