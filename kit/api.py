"""The thin-view kit shared by every app's public API views."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, cast

import orjson
from django.conf import settings
from django.http import HttpResponse
from rest_framework.response import Response
from rest_framework.views import APIView

from kit import metrics
from kit.errors import ApiError
from kit.parsers import JsonParser as JsonParser  # re-exported: views import it from here too
from kit.parsers import refuse_unstorable_request
from kit.renderers import RenderedJson
from kit.throttling import rate_limit_take

if TYPE_CHECKING:
    from accounts.auth import ApiPrincipal
    from accounts.models import Organization

logger = logging.getLogger(__name__)

RATE_LIMITED = "RATE_LIMITED"
REFUSAL_LOG_INTERVAL_SECONDS = 60.0
_refusals_logged: dict[Any, float] = {}  # API key id -> when this process last logged a refusal of it


class PublicApiView(APIView):
    """Base of every /public/v1 view: Bearer API-key auth, JSON bodies only, JSON errors, and the
    caller's organization."""

    parser_classes = [JsonParser]

    @property
    def organization(self) -> Organization:
        return cast("ApiPrincipal", self.request.user).organization  # ApiKeyAuthentication's user

    def max_body_bytes(self) -> int | None:
        """Largest body this view reads. DRF reads JSON bodies without Django's DATA_UPLOAD_MAX_MEMORY_SIZE
        check, so it is applied here, from Content-Length, before anything is read."""
        limit: int | None = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return limit

    def initial(self, request: Any, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # authentication: a 401 spends no budget
        enforce_rate_limit(request.user)
        refuse_unstorable_request(request.query_params, self.kwargs)
        limit = self.max_body_bytes()
        if limit is not None and content_length(request) > limit:
            raise ApiError("The request body is too large.", status_code=413, extra={"maxBytes": limit})


def content_length(request: Any) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def enforce_rate_limit(principal: Any) -> None:
    """The API key's token bucket (plan's api_requests_per_second and api_burst); 429 RATE_LIMITED when empty."""
    api_key = getattr(principal, "api_key", None)
    if api_key is None:
        return
    plan = principal.organization.plan
    decision = rate_limit_take(
        bucket=f"apikey:{api_key.pk}", per_second=plan.api_requests_per_second, burst=plan.api_burst
    )
    if not decision.allowed:
        _log_refusal(api_key, plan)
        metrics.record_rate_limit_refusal("api_key")
        raise ApiError.too_many(
            f"Rate limit exceeded: {plan.api_requests_per_second:g} requests per second per API key "
            f"(bursts up to {plan.api_burst}). Retry after {decision.retry_after} s.",
            code=RATE_LIMITED,
            retry_after=decision.retry_after,
            limit=plan.api_requests_per_second,
            burst=plan.api_burst,
        )


def _log_refusal(api_key: Any, plan: Any) -> None:
    """One WARNING a minute per API key and process, however many requests are refused (the key's
    prefix only: the key itself is a secret)."""
    now = time.monotonic()
    if now - _refusals_logged.get(api_key.pk, -REFUSAL_LOG_INTERVAL_SECONDS) < REFUSAL_LOG_INTERVAL_SECONDS:
        return
    if len(_refusals_logged) > 10_000:
        _refusals_logged.clear()
    _refusals_logged[api_key.pk] = now
    logger.warning(
        "API key %s… of organization %s is over its rate limit (%g/s, burst %s): refusing with 429",
        api_key.prefix,
        api_key.organization_id,
        plan.api_requests_per_second,
        plan.api_burst,
    )


def rendered_json_response(request: Any, rendered: RenderedJson) -> HttpResponse:
    """A 200 with a body rendered ahead (kit.renderers.RenderedJson): gzip-compressed when the request
    accepts gzip (Accept-Encoding) and the body is long enough to have it; indented JSON when the request
    asks for it (Accept: application/json; indent=N), like every other response."""
    if "indent=" in (getattr(request, "accepted_media_type", "") or ""):
        return Response(orjson.loads(rendered.body))
    gzipped = rendered.gzipped() if accepts_gzip(request.META.get("HTTP_ACCEPT_ENCODING", "")) else None
    response = HttpResponse(rendered.body if gzipped is None else gzipped, content_type="application/json")
    if gzipped is not None:
        response["Content-Encoding"] = "gzip"
    if rendered.compressible:
        response["Vary"] = "Accept-Encoding"
    return response


def accepts_gzip(accept_encoding: str) -> bool:
    """Whether an Accept-Encoding header accepts gzip (RFC 9110: `gzip`, `x-gzip` or `*`, without q=0)."""
    accepted = False
    for part in accept_encoding.split(","):
        coding, _, params = part.strip().partition(";")
        quality = params.strip().removeprefix("q=").strip() if params.strip().startswith("q=") else "1"
        try:
            weight = float(quality)
        except ValueError:
            weight = 1.0
        name = coding.strip().lower()
        if name in ("gzip", "x-gzip"):
            return weight > 0
        if name == "*":
            accepted = weight > 0
    return accepted
