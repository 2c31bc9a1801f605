import uuid

from django.db import models
from django.utils import timezone


class PlanCode(models.TextChoices):
    TRIAL = "trial", "Trial"
    LAUNCH = "launch", "Launch"
    STUDIO = "studio", "Studio"
    AGENCY = "agency", "Agency"


class Plan(models.Model):
    code = models.CharField(max_length=20, unique=True, choices=PlanCode.choices)
    name = models.CharField(max_length=60)
    max_active_agents = models.PositiveIntegerField(null=True, blank=True, help_text="Empty means unlimited.")
    ambient_sounds_allowed = models.BooleanField(default=False)
    included_minutes = models.PositiveIntegerField(help_text="Included call minutes per billing period.")

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return self.name


class Organization(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    name = models.CharField(max_length=200)
    plan = models.ForeignKey(Plan, on_delete=models.PROTECT, related_name="organizations")
    on_trial = models.BooleanField(default=False)
    billing_period_start = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ApiKey(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, help_text="The first characters of the key, to recognise it.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name or 'unnamed'})"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None
