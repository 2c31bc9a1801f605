"""Celery app. With REDIS_URL unset, tasks run in-process (eager); with it set, Redis is the broker."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")

app = Celery("voiceagent")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
