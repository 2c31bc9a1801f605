from django.db import migrations

# Included minutes are starting values; staff edit them in the admin.
PLANS = [
    ("trial", "Trial", 1, False, 60),
    ("launch", "Launch", 2, False, 500),
    ("studio", "Studio", 10, True, 2000),
    ("agency", "Agency", None, True, 10000),
]


def seed(apps, schema_editor):
    Plan = apps.get_model("accounts", "Plan")
    for code, name, max_agents, ambient, minutes in PLANS:
        Plan.objects.update_or_create(
            code=code,
            defaults={
                "name": name,
                "max_active_agents": max_agents,
                "ambient_sounds_allowed": ambient,
                "included_minutes": minutes,
            },
        )


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
