"""A test run's attempts become rows of their own (TestAttempt, one per attempt, only ever added): every
attempt rewrote the whole run's `results` JSON before. The attempts stored in `results` are moved into
rows (in the run's order: position of the test in test_ids, then attempt number), then the column goes."""

import uuid

import django.db.models.deletion
from django.db import migrations, models


def results_to_rows(apps, schema_editor):
    TestRun = apps.get_model("realtime", "TestRun")
    TestAttempt = apps.get_model("realtime", "TestAttempt")
    for run in TestRun.objects.exclude(results=[]).iterator(chunk_size=50):
        order = [str(test_id) for test_id in run.test_ids or []]
        rows = []
        for index, result in enumerate(run.results or []):
            if not isinstance(result, dict):
                continue
            test_id = str(result.get("testId") or "")
            position = order.index(test_id) if test_id in order else len(order) + index
            try:
                test_uuid = uuid.UUID(test_id)
            except ValueError:
                continue
            for number, attempt in enumerate(result.get("attempts") or []):
                if not isinstance(attempt, dict):
                    continue
                rows.append(
                    TestAttempt(
                        run=run,
                        position=position,
                        number=number,
                        test_id=test_uuid,
                        name=str(result.get("name") or "")[:200],
                        kind=str(result.get("kind") or "")[:20],
                        verdict=str(attempt.get("verdict") or "error")[:10],
                        result=attempt,
                    )
                )
        TestAttempt.objects.bulk_create(rows, batch_size=200, ignore_conflicts=True)


def rows_to_results(apps, schema_editor):
    TestRun = apps.get_model("realtime", "TestRun")
    TestAttempt = apps.get_model("realtime", "TestAttempt")
    for run in TestRun.objects.iterator(chunk_size=50):
        results: dict[int, dict] = {}
        for row in TestAttempt.objects.filter(run=run).order_by("position", "number"):
            result = results.setdefault(
                row.position,
                {"testId": str(row.test_id), "name": row.name, "kind": row.kind, "passRate": None, "attempts": []},
            )
            result["attempts"].append(row.result)
        for result in results.values():
            judged = [a for a in result["attempts"] if a.get("verdict") != "skipped"]
            if judged:
                result["passRate"] = round(sum(a.get("verdict") == "pass" for a in judged) / len(judged), 4)
        if results:
            TestRun.objects.filter(pk=run.pk).update(results=list(results.values()))


class Migration(migrations.Migration):
    dependencies = [
        ("realtime", "0004_session_modality"),
    ]

    operations = [
        migrations.AddField(
            model_name="testrun",
            name="served_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.AlterField(
            model_name="testrun",
            name="status",
            field=models.CharField(
                choices=[
                    ("queued", "Queued"),
                    ("running", "Running"),
                    ("completed", "Completed"),
                    ("failed", "Failed"),
                    ("cancelled", "Cancelled"),
                ],
                default="queued",
                max_length=10,
            ),
        ),
        migrations.CreateModel(
            name="TestAttempt",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("position", models.PositiveIntegerField()),
                ("number", models.PositiveSmallIntegerField()),
                ("test_id", models.UUIDField()),
                ("name", models.CharField(blank=True, default="", max_length=200)),
                ("kind", models.CharField(blank=True, default="", max_length=20)),
                ("verdict", models.CharField(max_length=10)),
                ("result", models.JSONField(default=dict)),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                (
                    "run",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="attempts", to="realtime.testrun"
                    ),
                ),
            ],
            options={
                "ordering": ["run", "position", "number"],
                "constraints": [models.UniqueConstraint(fields=("run", "position", "number"), name="testattempt_once")],
            },
        ),
        migrations.RunPython(results_to_rows, rows_to_results),
        migrations.RemoveField(
            model_name="testrun",
            name="results",
        ),
    ]
