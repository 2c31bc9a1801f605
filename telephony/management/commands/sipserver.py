import asyncio
import logging
import signal
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from telephony.sip.endpoint import SipAddress, SipEndpoint

logger = logging.getLogger("telephony.sip")


def _address(bind: str, rtp_ports: str, public: str) -> SipAddress:
    host, _, port = bind.rpartition(":")
    low, _, high = rtp_ports.partition("-")
    if not host or not port.isdigit() or not low.isdigit() or not high.isdigit() or int(low) > int(high):
        raise CommandError(f"Bind to HOST:PORT with RTP ports LOW-HIGH, not {bind!r} and {rtp_ports!r}")
    return SipAddress(host=host, port=int(port), public=public, rtp_ports=(int(low), int(high)))


class Command(BaseCommand):
    help = (
        "Serve SIP (UDP) for the organizations' SIP accounts: calls from their trunks and PBXs are answered by "
        "the called number's agent. Runs until SIGTERM or SIGINT."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--bind", default=settings.SIP_BIND or "0.0.0.0:5060", help="HOST:PORT (SIP_BIND)")
        parser.add_argument("--rtp-ports", default=settings.SIP_RTP_PORTS, help="LOW-HIGH (SIP_RTP_PORTS)")
        parser.add_argument(
            "--public-address", default=settings.SIP_PUBLIC_ADDRESS, help="advertised address (SIP_PUBLIC_ADDRESS)"
        )

    def handle(self, **options: Any) -> None:
        from realtime.apps import preload_in_background

        address = _address(options["bind"], options["rtp_ports"], options["public_address"])
        preload_in_background()  # the voice engine's models, as a web server loads them at its start
        asyncio.run(self._serve(address))

    async def _serve(self, address: SipAddress) -> None:
        loop = asyncio.get_running_loop()
        endpoint = SipEndpoint(address, loop)
        try:
            endpoint.start()
        except OSError as exc:
            raise CommandError(f"Cannot serve SIP on {address.host}:{address.port}: {exc}") from None
        stopping = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stopping.set)
        self.stdout.write(f"SIP endpoint on udp:{address.host}:{address.port} (advertised {address.advertised})")
        self.stdout.flush()
        await stopping.wait()
        endpoint.stop()
