import uuid

from django.db import models

from accounts.models import Organization
from agents.models import Agent
from kit.crypto import EncryptedTextField

MAX_NUMBERS_PER_AGENT = 25


class PhoneNumberStatus(models.TextChoices):
    CLAIMED = "claimed"
    AVAILABLE = "available"
    RELEASED = "released"
    SUSPENDED = "suspended"


class PhoneNumberSource(models.TextChoices):
    PURCHASED = "purchased"  # bought through the dashboard
    PORTED = "ported"  # moved in from another carrier
    IMPORTED = "imported"  # the customer's own provider account


class PhoneNumberProvider(models.TextChoices):
    TWILIO = "twilio"


class SetupStatus(models.TextChoices):
    PENDING = "pending"  # the number's voice webhook does not point at this service yet
    READY = "ready"  # calls to the number reach this service
    ERROR = "error"  # pointing the number at this service failed: see setup_error


class PhoneNumber(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="phone_numbers")
    phone_number = models.CharField(max_length=16, unique=True, help_text="E.164")
    friendly_name = models.CharField(max_length=200, blank=True, default="")
    status = models.CharField(max_length=10, choices=PhoneNumberStatus.choices, default=PhoneNumberStatus.CLAIMED)
    source = models.CharField(max_length=10, choices=PhoneNumberSource.choices, default=PhoneNumberSource.PURCHASED)
    provider = models.CharField(max_length=16, choices=PhoneNumberProvider.choices, default=PhoneNumberProvider.TWILIO)
    setup_status = models.CharField(max_length=10, choices=SetupStatus.choices, default=SetupStatus.READY)
    setup_error = models.TextField(blank=True, default="", help_text="Why the last setup failed (setup status error).")
    country_code = models.CharField(max_length=2)
    # The assignment: at most one agent per number (a foreign key), with its own handoff destination.
    assigned_agent = models.ForeignKey(
        Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="phone_numbers"
    )
    handoff_phone_number = models.CharField(max_length=16, null=True, blank=True)
    assigned_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["phone_number"]
        indexes = [models.Index(fields=["assigned_agent", "assigned_at"])]

    def __str__(self) -> str:
        return self.phone_number


class TelephonyAccount(models.Model):
    """An organization's account at its phone provider. The credentials are encrypted at rest, never
    shown again once saved, never logged and never part of any API."""

    organization = models.OneToOneField(Organization, on_delete=models.CASCADE, related_name="telephony_account")
    provider = models.CharField(max_length=16, choices=PhoneNumberProvider.choices, default=PhoneNumberProvider.TWILIO)
    account_sid = models.CharField(max_length=64, unique=True, help_text="Twilio Account SID (AC...)")
    auth_token = EncryptedTextField(help_text="Signs Twilio's webhooks; also the REST password without an API key.")
    api_key_sid = models.CharField(max_length=64, blank=True, default="", help_text="Optional API key SID (SK...)")
    api_key_secret = EncryptedTextField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["organization__name"]

    def __str__(self) -> str:
        return f"{self.provider} {self.account_sid}"
