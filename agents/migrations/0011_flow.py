from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0010_handoffs"),
    ]

    operations = [
        migrations.AddField(
            model_name="agent",
            name="flow",
            field=models.JSONField(blank=True, default=None, null=True),
        ),
    ]
