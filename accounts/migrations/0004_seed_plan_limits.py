from django.db import migrations

# (sustained requests/s per API key, burst, live calls at once; None: unlimited). Starting values;
# staff edit them in the admin. docs/operations/limits.md has the table.
LIMITS = {
    "trial": (10, 100, 2),
    "launch": (20, 200, 5),
    "studio": (50, 500, 20),
    "agency": (100, 1000, 100),
}


def seed(apps, schema_editor):
    Plan = apps.get_model("accounts", "Plan")
    for code, (per_second, burst, calls) in LIMITS.items():
        Plan.objects.filter(code=code).update(
            api_requests_per_second=per_second, api_burst=burst, max_concurrent_calls=calls
        )


class Migration(migrations.Migration):
    dependencies = [("accounts", "0003_plan_limits")]
    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
