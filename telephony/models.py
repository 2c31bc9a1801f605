import uuid

from django.db import models

from accounts.models import Organization
from agents.models import Agent
from calls.models import Call
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
    TELNYX = "telnyx"
    SIP = "sip"  # a SIP trunk or PBX, through this service's own SIP endpoint (manage.py sipserver)


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
    # Twilio: the Account SID (AC...). Telnyx: the Call Control application's connection ID, which every
    # webhook of its calls names. SIP: the trunk's or PBX's domain, HOST[:PORT] (several organizations may
    # share a trunk provider: unique only for the other providers).
    account_sid = models.CharField(
        max_length=64, help_text="Twilio Account SID (AC...), Telnyx Call Control connection ID, or SIP domain"
    )
    # Twilio: the Auth Token (signs its webhooks; the REST password without an API key). Telnyx: the API key.
    # SIP: the digest password of `sip_username` ("" without one).
    auth_token = EncryptedTextField(help_text="Twilio Auth Token, Telnyx API key (KEY...), or SIP digest password.")
    api_key_sid = models.CharField(max_length=64, blank=True, default="", help_text="Optional API key SID (SK...)")
    api_key_secret = EncryptedTextField(null=True, blank=True)
    # A Twilio-compatible provider's REST API (SignalWire's compatibility API, for example); empty: Twilio's
    # (TWILIO_API_BASE_URL). Requests to it go through the egress guard (kit/egress.py): its owner chose it.
    api_base_url = models.CharField(
        max_length=200, blank=True, default="", help_text="REST API base URL of a Twilio-compatible provider"
    )
    # Telnyx signs its webhooks with Ed25519: its public key (base64, Mission Control: Keys & Credentials).
    webhook_public_key = models.CharField(
        max_length=64, blank=True, default="", help_text="Telnyx webhook public key (base64 Ed25519)"
    )
    # SIP: the networks (CIDR) whose INVITEs reach the organization's agents without a challenge, and the
    # digest username that others authenticate with (its password is `auth_token`).
    allowed_networks = models.JSONField(default=list, blank=True)
    sip_username = models.CharField(max_length=64, blank=True, default="", help_text="SIP digest username")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["organization__name"]
        constraints = [
            models.UniqueConstraint(
                fields=["account_sid"], condition=~models.Q(provider="sip"), name="telephony_account_sid_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.provider} {self.account_sid}"


# --- Outbound calls and call batches (campaigns) ---------------------------------------------------


class CallBatchStatus(models.TextChoices):
    SCHEDULED = "scheduled"  # created; its startAt or window has not opened yet
    RUNNING = "running"  # placing calls
    PAUSED = "paused"  # paused by the client: nothing new is placed, live calls go on
    COMPLETED = "completed"  # every recipient has a final outcome
    CANCELED = "canceled"  # canceled: recipients not reached are `canceled`


class RecipientState(models.TextChoices):
    PENDING = "pending"  # waiting for its (first or next) attempt: see next_attempt_at
    CALLING = "calling"  # an attempt's call is queued, ringing or live
    DONE = "done"  # a final outcome


class RecipientOutcome(models.TextChoices):
    COMPLETED = "completed"  # answered by a person, the conversation ended
    VOICEMAIL = "voicemail"  # an answering machine answered
    NO_ANSWER = "no-answer"
    BUSY = "busy"
    FAILED = "failed"
    CANCELED = "canceled"


class CallBatch(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="call_batches")
    name = models.CharField(max_length=200)
    agent = models.ForeignKey(Agent, on_delete=models.PROTECT, related_name="call_batches")
    phone_number = models.ForeignKey(PhoneNumber, on_delete=models.PROTECT, related_name="call_batches")
    status = models.CharField(max_length=10, choices=CallBatchStatus.choices, default=CallBatchStatus.SCHEDULED)
    # No call before start_at (null: at once).
    start_at = models.DateTimeField(null=True, blank=True)
    # {"days": ["mon", ...], "start": "HH:MM", "end": "HH:MM", "timeZone": IANA}; null: any time.
    window = models.JSONField(null=True, blank=True)
    # At most this many of the batch's calls queued, ringing or live at once.
    concurrency = models.PositiveIntegerField(default=1)
    # {"maxAttempts": 1-5, "backoffMinutes": n, "retryOn": [outcomes]}.
    retry = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        # The dashboard's word for the feature (docs/guides/campaigns.md); the API's resource is call-batches.
        verbose_name = "campaign"
        verbose_name_plural = "campaigns"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["organization", "-created_at"]), models.Index(fields=["status"])]

    def __str__(self) -> str:
        return self.name


class CallBatchRecipient(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    batch = models.ForeignKey(CallBatch, on_delete=models.CASCADE, related_name="recipients")
    position = models.PositiveIntegerField()
    to_number = models.CharField(max_length=16, help_text="E.164")
    variables = models.JSONField(default=dict, blank=True)
    metadata = models.JSONField(null=True, blank=True)
    state = models.CharField(max_length=8, choices=RecipientState.choices, default=RecipientState.PENDING)
    outcome = models.CharField(max_length=10, choices=RecipientOutcome.choices, blank=True, default="")
    attempts = models.PositiveIntegerField(default=0)
    # Not before this time (the retry backoff); null: as soon as the batch may call.
    next_attempt_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "campaign recipient"
        ordering = ["batch", "position"]
        constraints = [
            models.UniqueConstraint(fields=["batch", "to_number"], name="batch_recipient_number_unique"),
        ]
        indexes = [models.Index(fields=["batch", "state", "next_attempt_at"], name="batch_recipient_due")]

    def __str__(self) -> str:
        return self.to_number


class OutboundCall(models.Model):
    """The outbound side of a call record (calls.Call with direction outbound): the number it is placed
    from, its batch recipient and attempt, and when it was handed to the carrier."""

    call = models.OneToOneField(Call, on_delete=models.CASCADE, primary_key=True, related_name="outbound")
    phone_number = models.ForeignKey(PhoneNumber, on_delete=models.SET_NULL, null=True, related_name="outbound_calls")
    recipient = models.ForeignKey(
        CallBatchRecipient, on_delete=models.CASCADE, null=True, blank=True, related_name="calls"
    )
    attempt = models.PositiveIntegerField(default=1)
    # Set (under a conditional update) just before the carrier is asked to place the call: a call is
    # placed at most once, whatever restarts. Null: still waiting in the queue.
    placed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["placed_at"], name="outbound_placed")]

    def __str__(self) -> str:
        return f"outbound {self.call_id}"


class AgentListVersion(models.Model):
    """A counter per organization of the changes to what its agent list is made of (its agents, their
    custom tools, knowledge documents and phone numbers). Written only by database triggers, at commit
    (telephony/agent_list.py), whatever makes the change (the API, the dashboard, a bulk update, a cascade);
    read to tell whether a list rendered earlier is still current. No foreign key: a trigger may write it
    while the organization itself is being deleted."""

    organization_id = models.UUIDField(primary_key=True)
    version = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.organization_id}: {self.version}"
