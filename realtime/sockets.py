"""What every voice WebSocket consumer shares (the browser session, the phone media stream)."""

from __future__ import annotations

import json
import logging
from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer

logger = logging.getLogger(__name__)


class JsonSocketConsumer(AsyncWebsocketConsumer):
    """Sends JSON text messages and closes once. Sending on a socket that went away, or that this side
    closed, does nothing: disconnect() then ends the conversation."""

    _closed = False

    async def send_message(self, message: dict[str, Any]) -> None:
        if self._closed:
            return
        try:
            await self.send(text_data=json.dumps(message, separators=(",", ":")))
        except Exception:  # the socket went away under us
            logger.debug("send on a closed socket", exc_info=True)

    async def close_once(self, code: int, reason: str = "") -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self.close(code=code, reason=reason)
        except Exception:  # the socket is already gone
            logger.debug("close on a closed socket", exc_info=True)
