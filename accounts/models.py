import uuid

from django.core.validators import MinValueValidator
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
    # Limits (docs/operations/limits.md). The defaults are the Launch values; the seed migration sets each plan's own.
    # A float so that a plan may allow less than one request a second (0.5: one every two seconds).
    api_requests_per_second = models.FloatField(
        default=20,
        validators=[MinValueValidator(0.001)],
        help_text="Sustained public API requests per second, per API key.",
    )
    api_burst = models.PositiveIntegerField(
        default=200, help_text="Requests an API key may make at once, above the sustained rate, after a pause."
    )
    max_concurrent_calls = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=5,
        help_text="Live calls (browser and phone) an organization may hold at once. Empty means unlimited.",
    )
    # Outbound calls (POST /calls, call batches) placed and not yet ended at once; more wait `queued`.
    # 0: the plan places no outbound calls. Empty: unlimited (still under max_concurrent_calls once live).
    max_outbound_calls = models.PositiveIntegerField(
        null=True,
        blank=True,
        default=2,
        help_text="Outbound calls an organization may have ringing or live at once (more wait queued). "
        "0 means no outbound calls; empty means unlimited.",
    )

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
    # The countries (ISO 3166-1 alpha-2 codes) outbound calls may go to; null: the countries of the
    # organization's claimed numbers (telephony.selectors.outbound_countries_in_effect). docs/guides/outbound-calls.md.
    outbound_countries = models.JSONField(
        null=True,
        blank=True,
        default=None,
        help_text="Countries outbound calls may go to (ISO codes such as US, GB). "
        "Empty: the countries of the organization's phone numbers.",
    )

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


class CallReservation(models.Model):
    """A live-call slot taken when a session token (browser) or a stream token (phone) is handed out,
    before any call record exists: it counts against the plan's max_concurrent_calls until the socket
    opens (then the call counts) or the token expires. Rows are taken under the organization's row lock
    (realtime.services.call_slot_reserve), so two processes cannot both take the last slot."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="call_reservations")
    channel = models.CharField(max_length=8)
    # The session token's id (browser) or the carrier's call id (phone: Twilio's CallSid).
    key = models.CharField(max_length=64)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["channel", "key"], name="call_reservation_channel_key")]

    def __str__(self) -> str:
        return f"{self.channel} {self.key}"
