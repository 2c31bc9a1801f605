import asyncio
import logging
import signal
from typing import Any

from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from telephony.sip.endpoint import SipAddress, SipEndpoint, sip_address

logger = logging.getLogger("telephony.sip")

_ALONE = (
    "Without Redis (REDIS_URL) the web processes cannot reach this process: calls come in, but hang-ups "
    "through the API and outbound calls do not reach it. On the embedded default, set SIP_BIND for the web "
    "server instead (make run), which then serves SIP itself."
)


class Command(BaseCommand):
    help = (
        "Serve SIP (UDP) for the organizations' SIP accounts: calls from their trunks and PBXs are answered by "
        "the called number's agent, and outbound calls from their numbers are placed. Runs until SIGTERM or "
        "SIGINT."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--bind", default=settings.SIP_BIND or "0.0.0.0:5060", help="HOST:PORT (SIP_BIND)")
        parser.add_argument("--rtp-ports", default=settings.SIP_RTP_PORTS, help="LOW-HIGH (SIP_RTP_PORTS)")
        parser.add_argument(
            "--public-address", default=settings.SIP_PUBLIC_ADDRESS, help="advertised address (SIP_PUBLIC_ADDRESS)"
        )

    def handle(self, **options: Any) -> None:
        from realtime.apps import preload_in_background

        try:
            address = sip_address(options["bind"], options["rtp_ports"], options["public_address"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if isinstance(get_channel_layer(), InMemoryChannelLayer):
            self.stderr.write(_ALONE)
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
        outbound = asyncio.create_task(endpoint.take_outbound())
        await stopping.wait()
        outbound.cancel()
        endpoint.stop()
