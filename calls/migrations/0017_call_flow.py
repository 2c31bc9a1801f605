from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("calls", "0016_handoffs"),
    ]

    operations = [
        migrations.AddField(
            model_name="call",
            name="flow",
            field=models.JSONField(blank=True, null=True),
        ),
    ]
