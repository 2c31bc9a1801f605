from typing import Any

from accounts.commands import organization_from_option
from kit.commands import JsonCommand
from telephony.models import PhoneNumberProvider
from telephony.services.accounts import telephony_account_set


class Command(JsonCommand):
    help = (
        "Set an organization's telephony account (one per organization; credentials are encrypted and never "
        'printed). Prints {"organizationId": ..., "provider": ...}.'
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--org", required=True)
        parser.add_argument("--provider", default=PhoneNumberProvider.TWILIO, choices=PhoneNumberProvider.values)
        parser.add_argument(
            "--account-sid",
            "--connection-id",
            "--sip-domain",
            required=True,
            help="Twilio Account SID (AC...), Telnyx connection ID, or a SIP account's domain (HOST[:PORT])",
        )
        parser.add_argument(
            "--auth-token",
            "--api-key",
            "--sip-password",
            default=None,
            help="Twilio Auth Token, Telnyx API key, or SIP digest password; required for a new Twilio or Telnyx account",
        )
        parser.add_argument("--api-key-sid", default="", help="Optional API key SID (SK...) for REST calls")
        parser.add_argument("--api-key-secret", default=None)
        parser.add_argument(
            "--api-base-url",
            default="",
            help="A Twilio-compatible provider's REST API base URL (e.g. https://example.signalwire.com); empty: Twilio",
        )
        parser.add_argument("--public-key", default="", help="Telnyx: the webhook public key (base64)")
        parser.add_argument("--allowed-networks", default="", help="SIP: the networks calls come from (CIDR,...)")
        parser.add_argument(
            "--sip-username", default="", help="SIP: the digest username other callers authenticate with"
        )

    def run(self, **options: Any) -> dict[str, Any]:
        organization = organization_from_option(options["org"])
        account = telephony_account_set(
            organization=organization,
            provider=options["provider"],
            account_sid=options["account_sid"],
            auth_token=options["auth_token"],
            api_key_sid=options["api_key_sid"],
            api_key_secret=options["api_key_secret"],
            api_base_url=options["api_base_url"],
            webhook_public_key=options["public_key"],
            allowed_networks=options["allowed_networks"] or None,
            sip_username=options["sip_username"],
        )
        return {"organizationId": str(organization.pk), "provider": account.provider}
