"""Content-Security-Policy for every page this service serves (docs/operations/security.md).

Django 5.2 has no CSP of its own. The dashboard (/admin/ with the agent page's talk panel), the API docs
(/docs/, Swagger UI from drf-spectacular-sidecar), the landing page and the demo page (/demo/) load
scripts, styles, images and fonts from this origin only. The few inline <script>/<style> blocks of our
templates carry the per-response nonce (`{{ request.csp_nonce }}`); nothing else inline runs. Voice
sessions connect to REALTIME_WS_URL (or this host over ws/wss), and WebRTC ones send their offer to its host
over http(s). Other responses (JSON, audio) get a
policy that allows nothing, so a response rendered by mistake as a page cannot run anything either.
"""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.utils.functional import SimpleLazyObject

_NOTHING = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"


def _socket_origins(request: Any) -> list[str]:
    """Where the pages' voice sessions go: REALTIME_WS_URL's origin (the socket), and the same host over
    http(s) (a WebRTC session's offerUrl); else this host over ws:/wss:."""
    configured = urlsplit(settings.REALTIME_WS_URL or "")
    if configured.scheme in ("ws", "wss") and configured.netloc:
        web = "https" if configured.scheme == "wss" else "http"
        return [f"{configured.scheme}://{configured.netloc}", f"{web}://{configured.netloc}"]
    scheme = "wss" if request.is_secure() else "ws"
    return [f"{scheme}://{request.get_host()}"]


def page_policy(request: Any, nonce: str) -> str:
    directives = {
        "default-src": ["'self'"],
        "script-src": ["'self'", f"'nonce-{nonce}'"],
        "style-src": ["'self'", f"'nonce-{nonce}'"],
        # Swagger UI draws its icons as data: images; the demo page's favicon is a data: URL.
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'", "data:"],
        "connect-src": ["'self'", *_socket_origins(request)],
        "media-src": ["'self'", "blob:"],
        "worker-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'self'"],  # the admin's related-object popups are windows, not frames
    }
    return "; ".join(f"{name} {' '.join(values)}" for name, values in directives.items())


class ContentSecurityPolicyMiddleware:
    """Adds Content-Security-Policy (or its -Report-Only twin, CSP_MODE) to every response."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        # Made on first use: only pages that render an inline block pay for the random bytes.
        request.csp_nonce = SimpleLazyObject(lambda: secrets.token_urlsafe(18))
        response = self.get_response(request)
        mode = settings.CSP_MODE
        if mode == "off":
            return response
        header = "Content-Security-Policy" if mode == "enforce" else "Content-Security-Policy-Report-Only"
        if header in response:
            return response  # a view that set its own
        if response.get("Content-Type", "").startswith("text/html"):
            response[header] = page_policy(request, str(request.csp_nonce))
        else:
            response[header] = _NOTHING
        return response
