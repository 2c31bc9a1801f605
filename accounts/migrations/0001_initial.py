import uuid

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True
    dependencies: list = []

    operations = [
        migrations.CreateModel(
            name="Plan",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "code",
                    models.CharField(
                        choices=[("trial", "Trial"), ("launch", "Launch"), ("studio", "Studio"), ("agency", "Agency")],
                        max_length=20,
                        unique=True,
                    ),
                ),
                ("name", models.CharField(max_length=60)),
                (
                    "max_active_agents",
                    models.PositiveIntegerField(blank=True, help_text="Empty means unlimited.", null=True),
                ),
                ("ambient_sounds_allowed", models.BooleanField(default=False)),
                (
                    "included_minutes",
                    models.PositiveIntegerField(help_text="Included call minutes per billing period."),
                ),
            ],
            options={"ordering": ["id"]},
        ),
        migrations.CreateModel(
            name="Organization",
            fields=[
                ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ("name", models.CharField(max_length=200)),
                ("on_trial", models.BooleanField(default=False)),
                ("billing_period_start", models.DateTimeField(default=django.utils.timezone.now)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "plan",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="organizations", to="accounts.plan"
                    ),
                ),
            ],
            options={"ordering": ["name"]},
        ),
        migrations.CreateModel(
            name="ApiKey",
            fields=[
                ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ("name", models.CharField(blank=True, max_length=100)),
                (
                    "prefix",
                    models.CharField(help_text="The first characters of the key, to recognise it.", max_length=16),
                ),
                ("key_hash", models.CharField(editable=False, max_length=64, unique=True)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("last_used_at", models.DateTimeField(blank=True, null=True)),
                ("revoked_at", models.DateTimeField(blank=True, null=True)),
                (
                    "organization",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="api_keys", to="accounts.organization"
                    ),
                ),
            ],
            options={"ordering": ["-created_at"], "verbose_name": "API key"},
        ),
    ]
