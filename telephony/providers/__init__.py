"""Phone providers: one small adapter per carrier, registered by name and imported lazily.

Twilio (Programmable Voice + Media Streams) and Telnyx (Call Control + media streaming); another carrier
adds an entry here and a `PhoneProvider` subclass. `provider_for(account)` is the only way the rest of the service gets
an adapter, so the account's credentials never travel further than the adapter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kit.providers import ProviderError, Registry
from telephony.providers.base import PhoneProvider

if TYPE_CHECKING:
    from telephony.models import TelephonyAccount

__all__ = ["PROVIDERS", "PhoneProvider", "ProviderError", "provider_for"]

PROVIDERS = Registry(
    "phone provider",
    {
        "twilio": "telephony.providers.twilio:TwilioProvider",
        "telnyx": "telephony.providers.telnyx:TelnyxProvider",
        "sip": "telephony.providers.sip:SipProvider",
    },
)


def provider_for(account: TelephonyAccount) -> PhoneProvider:
    """The adapter for the organization's telephony account (ProviderError(permanent=True) for an
    unknown provider name)."""
    return PROVIDERS.get(account.provider)(account)
